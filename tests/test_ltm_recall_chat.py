"""Recall on a chat: the days, people and neighbouring turns a question points at."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hivemind.ltm.backend import MemoryBackend
from hivemind.ltm.inmemory import InMemoryBackend
from hivemind.ltm.people import names, roles
from hivemind.ltm.retrieval import RetrievalTuning, Retriever, blend, fuse
from hivemind.ltm.sqlite import SQLiteBackend
from hivemind.settings import RetrievalWeights
from tests.test_ltm_backend import rec

EVERYTHING = {"status": "active"}
ASKED = datetime(2023, 4, 1, 10, tzinfo=UTC)


@pytest.fixture(params=["inmemory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryBackend]:
    b: MemoryBackend = (
        InMemoryBackend() if request.param == "inmemory" else SQLiteBackend(tmp_path / "m.db")
    )
    yield b
    b.close()


def chat(backend: MemoryBackend, *sessions: tuple[datetime, list[str]]) -> None:
    """Turns a minute apart, each session starting at its time; ids s<session>-t<turn>."""
    records = []
    for s, (start, turns) in enumerate(sessions):
        for t, text in enumerate(turns):
            when = start + timedelta(minutes=t)
            records.append(rec(f"s{s}-t{t}", text, created_at=when))
    backend.add_many(records)


def ids(backend: MemoryBackend, question: str, k: int = 10) -> list[str]:
    found = Retriever(backend, RetrievalWeights()).retrieve(question, EVERYTHING, k=k, at=ASKED)
    return [m.id for m in found]


def test_the_day_after_a_talk_is_found_by_the_talk(backend: MemoryBackend) -> None:
    chat(
        backend,
        (datetime(2023, 3, 7, 18, tzinfo=UTC), ["Cooked a big pot of chili tonight."]),
        (datetime(2023, 3, 10, 18, tzinfo=UTC), ["Thinking of repainting the kitchen green."]),
        (datetime(2023, 3, 14, 18, tzinfo=UTC), ["Tonight I cooked mushroom soup."]),
        (datetime(2023, 3, 21, 18, tzinfo=UTC), ["Cooked fish tacos, so good."]),
    )
    # 2023-03-10 is a Friday: the Tuesday after is the 14th.
    question = "What did I cook the Tuesday after we talked about repainting the kitchen?"
    assert ids(backend, question)[0] == "s2-t0"
    assert ids(backend, "What did I cook on March 7?")[0] == "s0-t0"
    # A day and no other word to look for: that day's memories.
    assert ids(backend, "What did I do on March 10?")[0] == "s1-t0"
    # Without a day, the newest of the equal matches wins (recency breaks the tie).
    assert ids(backend, "What did I cook?")[0] == "s3-t0"


def test_a_person_named_in_the_question_is_found_by_their_role(backend: MemoryBackend) -> None:
    chat(
        backend,
        (datetime(2023, 1, 5, 9, tzinfo=UTC), ["My sister Ana is visiting next month."]),
        (datetime(2023, 2, 5, 9, tzinfo=UTC), ["My sister got a job at the bakery."]),
        (datetime(2023, 3, 5, 9, tzinfo=UTC), ["My brother got a job at the bank."]),
        (datetime(2023, 3, 9, 9, tzinfo=UTC), ["Job hunting is exhausting, says my friend."]),
    )
    found = ids(backend, "Where did Ana get a job?")
    assert found.index("s1-t0") < found.index("s2-t0")  # the newer brother's job comes after


def test_a_turn_saying_she_is_found_through_the_turn_before(backend: MemoryBackend) -> None:
    chat(
        backend,
        (datetime(2023, 1, 5, 9, tzinfo=UTC), ["My sister Ana is visiting next month."]),
        (
            datetime(2023, 2, 5, 9, tzinfo=UTC),
            [
                "Had lunch with my sister yesterday.",
                "How is she doing?",
                "She started working at the children's hospital.",
            ],
        ),
        (datetime(2023, 3, 5, 9, tzinfo=UTC), ["My brother started working at a law firm."]),
        (datetime(2023, 3, 6, 9, tzinfo=UTC), ["Working from home again today."]),
    )
    found = ids(backend, "Where is Ana working now?")
    assert found.index("s1-t2") < found.index("s2-t0")


def test_a_neighbour_that_matches_nothing_and_refers_to_nothing_is_left_out(
    backend: MemoryBackend,
) -> None:
    chat(
        backend,
        (datetime(2023, 2, 5, 9, tzinfo=UTC), ["The staging database runs Postgres 16.",
                                               "Lunch at noon tomorrow."]),
    )  # fmt: skip
    assert ids(backend, "Which database version is on staging?") == ["s0-t0"]


def test_the_same_text_said_twice_is_returned_once(backend: MemoryBackend) -> None:
    chat(
        backend,
        (datetime(2023, 2, 5, 9, tzinfo=UTC), ["Do you think I should learn an instrument?"]),
        (datetime(2023, 2, 9, 9, tzinfo=UTC), ["do you think I should learn an  instrument?"]),
        (datetime(2023, 1, 9, 9, tzinfo=UTC), ["Started violin lessons, a new instrument."]),
    )
    found = ids(backend, "Which instrument did I learn?")
    assert sorted(found) == ["s1-t0", "s2-t0"]


def test_roles_are_read_from_what_is_said_around_a_name() -> None:
    texts = [
        "My sister Ana is visiting.",
        "Ana, my sister, called.",
        "Oh, Ana came over. That's my sister, by the way.",
        "Ana says hi, my mom says hi too.",  # no role given to Ana
        "my best friend Ana lent me a tent",
    ]
    assert roles("Ana", texts) == ["sister", "friend"]
    assert roles("Bruno", texts) == []
    assert names("What did Ana and Bruno buy on Monday in May?") == ["Ana", "Bruno"]


def test_blend_averages_the_scaled_scores() -> None:
    blended = blend([0.5, 1.0, 0.0], [0.5, None, 0.9], dense_share=0.5)
    assert blended == pytest.approx([0.25 + 0.5 * 0.5 / 0.9, 0.5, 0.5])


def test_fusion_ranks_what_both_rankings_put_first_first() -> None:
    lexical = [3.0, 9.0, 0.0, 1.0]
    dense = [0.9, 0.8, 0.95, None]  # the last has no vector
    fused = fuse(lexical, dense, dense_share=0.5)
    assert fused.index(1.0) == 1  # 1st by words, 3rd by meaning, 2nd by both: best overall
    assert fused[3] == 0.0  # last by words, no vector
    assert fused[2] > 0.0  # no word matched, but 1st by meaning


def test_the_design_formula_is_a_tuning_away() -> None:
    b = InMemoryBackend()
    chat(
        b,
        (datetime(2023, 2, 5, 9, tzinfo=UTC), ["The staging database runs Postgres 16."]),
        (datetime(2023, 2, 6, 9, tzinfo=UTC), ["Staging is down again."]),
    )
    design = RetrievalTuning(gate=0.0, minmax_relevance=True)
    for tuning, weakest in ((RetrievalTuning(), "share of the best"), (design, "min-max")):
        found = Retriever(b, RetrievalWeights(), tuning).retrieve(
            "staging database", EVERYTHING, k=5, at=ASKED
        )
        low = min(m.relevance for m in found)
        assert (low > 0.0) if weakest == "share of the best" else (low == 0.0)


def test_a_store_indexes_memories_by_scope_and_time(tmp_path: Path) -> None:
    SQLiteBackend(tmp_path / "m.db").close()
    conn = sqlite3.connect(tmp_path / "m.db")
    [(columns,)] = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'memories_time'"
    ).fetchall()
    conn.close()
    assert "(scope, created_at)" in columns


def test_turns_sharing_one_timestamp_keep_their_order_as_neighbours(
    backend: MemoryBackend,
) -> None:
    # Chat logs often stamp every turn of a session with the session's time.
    when = datetime(2023, 2, 5, 9, tzinfo=UTC)
    turns = [
        "She said the bakery job pays well.",  # before the lead-in: not its neighbour
        "My sister Ana is visiting next month.",
        "Had lunch with my sister.",
        "She started at the children's hospital.",
    ]
    backend.add_many([rec(f"t{i}", text, created_at=when) for i, text in enumerate(turns)])
    later = when + timedelta(days=30)  # newer: recency alone would put it first
    backend.add(rec("b", "My brother started at a law firm.", created_at=later))
    found = ids(backend, "Where has Ana started?")
    assert found.index("t3") < found.index("b")
    assert "t0" not in found


def test_a_neighbour_is_never_one_the_search_may_not_see(backend: MemoryBackend) -> None:
    when = datetime(2023, 2, 5, 9, tzinfo=UTC)
    backend.add_many(
        [
            rec("p1", "My sister Ana got a job.", tier="project", project="p1", created_at=when),
            rec("p2", "She loves it there.", tier="project", project="p2",
                created_at=when + timedelta(minutes=1)),
            rec("prop", "She says it pays well.", tier="project", project="p1",
                status="proposed", created_at=when + timedelta(minutes=1)),
        ]
    )  # fmt: skip
    p1 = {"status": "active", "scope": {"$in": ["global", "project:p1"]}}
    found = Retriever(backend, RetrievalWeights()).retrieve("Ana job", p1, k=10, at=ASKED)
    assert [m.id for m in found] == ["p1"]
