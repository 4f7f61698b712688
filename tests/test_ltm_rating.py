"""Importance: how it was set is kept, the model's ratings are parsed warily, stored,
and change the ranking; the budget decides how many memories one request may rate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from hivemind.hive.layout import Hive
from hivemind.ltm.inmemory import InMemoryBackend
from hivemind.ltm.rating import (
    MAX_BATCH,
    RatingBudget,
    apply_ratings,
    batch_text,
    estimate_tokens,
    fitting,
    parse_ratings,
    pending,
)
from hivemind.ltm.records import ImportanceSource
from hivemind.ltm.store import LongTermMemory

NOW = datetime(2024, 6, 1, tzinfo=UTC)


@pytest.fixture(params=["inmemory", "sqlite"])
def ltm(request: pytest.FixtureRequest, hive: Hive) -> Iterator[LongTermMemory]:
    with LongTermMemory(InMemoryBackend() if request.param == "inmemory" else hive) as store:
        yield store


def test_a_memory_says_how_its_importance_was_set(ltm: LongTermMemory) -> None:
    guessed = ltm.remember("we chose Postgres for the ledger", agent="bob", scope="global")
    stated = ltm.remember("the deploy key rotates monthly", agent="bob", scope="global",
                          importance=0.4)
    assert guessed.importance_by is ImportanceSource.HEURISTIC
    assert stated.importance_by is ImportanceSource.GIVEN
    stored = {r.id: r for r in ltm.backend.list_all()}
    assert stored[guessed.id].importance_by is ImportanceSource.HEURISTIC
    assert stored[stated.id].importance == 0.4
    assert stored[stated.id].importance_by is ImportanceSource.GIVEN


def test_only_the_agents_own_heuristic_memories_wait_oldest_first(ltm: LongTermMemory) -> None:
    first = ltm.remember("the first note", agent="bob", scope="global", at=NOW)
    second = ltm.remember("the second note", agent="bob", scope="global",
                          at=NOW + timedelta(minutes=1))
    ltm.remember("a note with its own importance", agent="bob", scope="global", importance=0.9)
    ltm.remember("a note of another agent", agent="ann", scope="global")
    assert [m.id for m in pending(ltm.backend, "bob")] == [first.id, second.id]


def test_import_lines_keep_or_mark_how_importance_was_set(ltm: LongTermMemory) -> None:
    lines = [
        json.dumps({"id": "a", "content": "the build uses bazel", "agent": "bob"}),
        json.dumps({"id": "b", "content": "the CI runs nightly", "importance": 0.7}),
        json.dumps({"id": "c", "content": "rated before", "importance": 0.9,
                    "importance_by": "model"}),
    ]
    ltm.import_jsonl(lines)
    by = {r.id: r.importance_by for r in ltm.backend.list_all()}
    assert by == {"a": ImportanceSource.HEURISTIC, "b": ImportanceSource.GIVEN,
                  "c": ImportanceSource.MODEL}
    exported = {line["id"]: line["importance_by"] for line in ltm.export()}
    assert exported == {"a": "heuristic", "b": "given", "c": "model"}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param("1: 9\n2: 1\n3: 10", {0: 0.889, 1: 0.0, 2: 1.0}, id="well-formed"),
        pytest.param("1. 7/10\n- 2) 4\n**3** = 5.5", {0: 0.667, 1: 0.333, 2: 0.5},
                     id="other-framings"),
        pytest.param("Sure! I think these are all quite important.", {}, id="plain-text"),
        pytest.param("m-1f2e3d4c5b6a7980: 9\n7: 8\n0: 5", {}, id="wrong-ids"),
        pytest.param("1: 11\n2: 0\n3: -4\n1: 95", {}, id="out-of-range"),
        pytest.param("1: 3\n1: 9", {0: 0.222}, id="a-repeat-keeps-the-first"),
        pytest.param("", {}, id="empty"),
    ],
)
def test_the_models_answer_is_parsed_and_bad_lines_are_ignored(
    answer: str, expected: dict[int, float]
) -> None:
    assert parse_ratings(answer, 3) == expected


def test_a_rating_is_stored_and_changes_the_ranking(ltm: LongTermMemory) -> None:
    # Equally relevant, equally old: the heuristic cannot tell them apart, the model can.
    lunch = ltm.remember("the standup moved to ten", agent="bob", scope="global", at=NOW)
    outage = ltm.remember("the standup moved to nine", agent="bob", scope="global", at=NOW)
    assert lunch.importance == outage.importance
    batch = pending(ltm.backend, "bob")
    ratings = {i: (0.9 if m.id == outage.id else 0.1) for i, m in enumerate(batch)}

    changed = apply_ratings(ltm.backend, batch, ratings)

    assert changed == {outage.id: (outage.importance, 0.9), lunch.id: (lunch.importance, 0.1)}
    assert pending(ltm.backend, "bob") == []
    stored = ltm.backend.get(outage.id)
    assert stored is not None and stored.importance_by is ImportanceSource.MODEL
    found = ltm.recall("standup moved", agent="bob", at=NOW, record_access=False)
    assert [m.id for m in found] == [outage.id, lunch.id]


def test_a_rating_of_a_memory_forgotten_meanwhile_is_dropped(ltm: LongTermMemory) -> None:
    kept = ltm.remember("keep this one", agent="bob", scope="global")
    gone = ltm.remember("forget this one", agent="bob", scope="global")
    batch = pending(ltm.backend, "bob")
    ltm.forget([gone.id])
    changed = apply_ratings(ltm.backend, batch, {0: 0.5, 1: 0.5})
    assert list(changed) == [kept.id]


def test_the_budget_decides_how_many_memories_one_request_rates(ltm: LongTermMemory) -> None:
    for n in range(40):
        ltm.remember(f"note number {n} about the release train", agent="bob", scope="global")
    waiting = pending(ltm.backend, "bob", limit=100)
    assert fitting(waiting, 0) == [] and fitting(waiting, 100) == []  # not even the prompt
    few = fitting(waiting, estimate_tokens(waiting[:3]))
    assert [m.id for m in few] == [m.id for m in waiting[:3]]
    assert len(fitting(waiting, 10**9)) == MAX_BATCH  # one request rates a batch at most


def test_the_budget_is_kept_per_agent_and_survives_a_damaged_value(
    ltm: LongTermMemory,
) -> None:
    RatingBudget(agent_tokens=10_000, rating_tokens=120).save(ltm.backend, "bob")
    budget = RatingBudget.load(ltm.backend, "bob")
    assert budget.allowance(0.05) == 500 - 120
    budget.misses = 2  # two requests in a row rated nothing: a quarter of the share
    budget.save(ltm.backend, "bob")
    assert RatingBudget.load(ltm.backend, "bob").allowance(0.05) == 125 - 120
    assert RatingBudget.load(ltm.backend, "ann") == RatingBudget()
    ltm.backend.meta_set("rating:bob", "{not json")
    assert RatingBudget.load(ltm.backend, "bob") == RatingBudget()


def test_the_rater_sees_numbered_memories_cut_to_a_readable_length(
    ltm: LongTermMemory,
) -> None:
    ltm.remember("short one", agent="bob", scope="global", at=NOW)
    ltm.remember("word " * 400, agent="bob", scope="global", at=NOW + timedelta(seconds=1))
    text = batch_text(pending(ltm.backend, "bob"))
    first, second = text.splitlines()
    assert first == "1. short one"
    assert second.startswith("2. word word") and second.endswith("…") and len(second) < 620
