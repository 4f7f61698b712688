"""The LongTermMemory facade: tiers, isolation, approval, eviction, task end, reflection."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hivemind.errors import UserError
from hivemind.hive.layout import HUMAN, Hive
from hivemind.ltm.inmemory import InMemoryBackend
from hivemind.ltm.records import MemoryKind, MemoryRecord, MemoryStatus, Tier
from hivemind.ltm.retention import RetentionPolicy
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.blocks import HistoryBlock
from hivemind.settings import MemorySettings

NOW = datetime(2024, 6, 1, tzinfo=UTC)


@pytest.fixture(params=["inmemory", "sqlite"])
def ltm(request: pytest.FixtureRequest, hive: Hive) -> Iterator[LongTermMemory]:
    target = InMemoryBackend() if request.param == "inmemory" else hive
    with LongTermMemory(target, MemorySettings(reflection_threshold=20)) as store:
        yield store


def contents(found: Sequence[object]) -> list[str]:
    return [m.content for m in found]  # type: ignore[attr-defined]


# -- tiers and isolation ----------------------------------------------------------
def test_remember_uses_the_hierarchical_key(ltm: LongTermMemory) -> None:
    r = ltm.remember("use uv", agent="a", scope="global", domain="py", task_type="setup")
    assert r.key.startswith("py:setup:") and len(r.key.rsplit(":", 1)[1]) == 16


def test_the_same_memory_twice_is_stored_once(ltm: LongTermMemory) -> None:
    first = ltm.remember("the CI runner has 2 cores", agent="a", scope="global", importance=0.4)
    again = ltm.remember("the CI runner has 2 cores", agent="b", scope="global", importance=0.8)
    assert again.id == first.id and again.importance == 0.8
    assert ltm.backend.count() == 1


@pytest.mark.parametrize("query", ["database", "", "the", "what do we know", "Zeus MySQL"])
def test_a_project_never_retrieves_another_projects_memories(
    ltm: LongTermMemory, query: str
) -> None:
    ltm.remember("Apollo database is Postgres", agent="a", scope="project", project="apollo")
    ltm.remember("Zeus database is MySQL", agent="a", scope="project", project="zeus")
    ltm.remember("every database needs backups", agent="a", scope="global")
    found = ltm.recall(query, agent="a", project="apollo", k=50)
    assert all(m.record.project in ("apollo", None) for m in found)
    assert "Zeus database is MySQL" not in contents(found)
    picked = ltm.context_for(
        query, agent="a", project="apollo", task_id=None, max_tokens=10_000, count_tokens=len
    )
    assert "Zeus database is MySQL" not in contents(picked)


def test_without_a_project_only_global_memories_are_seen(ltm: LongTermMemory) -> None:
    ltm.remember("Apollo database is Postgres", agent="a", scope="project", project="apollo")
    ltm.remember("every database needs backups", agent="a", scope="global")
    assert contents(ltm.recall("database", agent="a")) == ["every database needs backups"]


def test_task_memories_are_seen_only_by_their_task(ltm: LongTermMemory) -> None:
    ltm.remember("scratch: port 8081 is free", agent="a", scope="task", task_id="t1")
    assert contents(ltm.recall("port", agent="a", task_id="t1")) == ["scratch: port 8081 is free"]
    assert ltm.recall("port", agent="a", task_id="t2") == []
    assert ltm.recall("port", agent="a") == []


@pytest.mark.parametrize(
    ("scope", "kwargs", "message"),
    [("task", {}, "task id"), ("project", {}, "project name"), ("galaxy", {}, "scope must be")],
)
def test_a_scope_without_its_owner_is_refused(
    ltm: LongTermMemory, scope: str, kwargs: dict[str, str], message: str
) -> None:
    with pytest.raises(UserError, match=message):
        ltm.remember("x", agent="a", scope=scope, **kwargs)  # type: ignore[arg-type]


def test_recall_records_the_access(ltm: LongTermMemory) -> None:
    r = ltm.remember("the VPN needs a token", agent="a", scope="global", at=NOW)
    later = NOW + timedelta(hours=5)
    ltm.recall("VPN token", agent="a", at=later)
    got = ltm.backend.get(r.id)
    assert got is not None and got.access_count == 1 and got.last_accessed == later
    ltm.recall("VPN token", agent="a", at=later + timedelta(hours=1), record_access=False)
    got = ltm.backend.get(r.id)
    assert got is not None and got.access_count == 1


# -- global preferences need a person ---------------------------------------------
def test_a_global_preference_waits_for_approval(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        r = ltm.remember("answer in French", agent="ann", scope="global", preference=True)
        assert r.status is MemoryStatus.PROPOSED
        assert ltm.recall("French", agent="bob") == []
        mail = list((hive.mailbox_dir(HUMAN) / "new").glob("*.md"))
        assert len(mail) == 1
        text = mail[0].read_text()
        assert r.id in text and "answer in French" in text and "from: ann" in text
        assert f"hivemind memory approve {r.id}" in text
        approved = ltm.approve(r.id)
        assert approved.status is MemoryStatus.ACTIVE
        assert contents(ltm.recall("French", agent="bob")) == ["answer in French"]
        with pytest.raises(UserError, match="not waiting"):
            ltm.approve(r.id)
        with pytest.raises(UserError, match="no memory"):
            ltm.approve("m-nope")


def test_a_project_preference_needs_no_approval(ltm: LongTermMemory) -> None:
    r = ltm.remember("tabs", agent="a", scope="project", project="p", preference=True)
    assert r.status is MemoryStatus.ACTIVE


# -- bounded size -------------------------------------------------------------------
def test_eviction_removes_lowest_importance_then_oldest(tmp_path: Path) -> None:
    backend = InMemoryBackend()
    with LongTermMemory(backend, MemorySettings(max_items=10)) as ltm:
        for i in range(10):
            importance = 0.5 if i % 2 else 0.3
            at = NOW + timedelta(minutes=i)
            ltm.remember(f"fact {i}", agent=f"a{i}", scope="global", importance=importance, at=at)
        ltm.remember("approved rule", agent="h", scope="global", importance=0.0,
                     preference=True, at=NOW)  # fmt: skip
    left = {r.content for r in backend.list_all()}
    assert "fact 0" not in left  # lowest importance, oldest
    assert "fact 2" in left
    assert "approved rule" in left  # a person's decision is never evicted
    assert len(left) == 10


def test_retention_prunes_an_agent_past_its_cap_by_importance(ltm: LongTermMemory) -> None:
    ltm.policy = RetentionPolicy(max_per_agent=3)
    for i, imp in enumerate([0.9, 0.1, 0.8, 0.2, 0.7]):
        ltm.remember(f"note {i}", agent="ann", scope="global", importance=imp, at=NOW)
    ltm.remember("someone else's note", agent="bob", scope="global", importance=0.0, at=NOW)
    kept = {r.content for r in ltm.backend.query({"agent": "ann"})}
    assert kept == {"note 0", "note 2", "note 4"}
    assert ltm.backend.count({"agent": "bob"}) == 1


# -- task end -------------------------------------------------------------------------
def history(action: str, detail: str, importance: float | None = None) -> HistoryBlock:
    meta = {} if importance is None else {"importance": importance}
    return HistoryBlock(action=action, detail=detail, metadata=meta)


def test_consolidation_keeps_history_of_importance_at_least_0_7(ltm: LongTermMemory) -> None:
    blocks = [
        history("read_file", "README.md", importance=0.2),
        history("decide", "use SQLite for the cache", importance=0.7),
        history("note", "the deploy key is in vault", importance=9),  # 1-10 scale
        history("deploy", "we decided to never deploy on Friday: the release failed, critical"),
        history("ls", "listed files"),
    ]
    report = ltm.end_task("t1", success=True, goal="ops/deploy", history=blocks, project="p",
                          agent="ann")  # fmt: skip
    stored = ltm.backend.get_many(report.consolidated)
    assert [r.content for r in stored] == [
        "decide: use SQLite for the cache",
        "note: the deploy key is in vault",
        "deploy: we decided to never deploy on Friday: the release failed, critical",
    ]
    assert all(r.tier is Tier.PROJECT and r.project == "p" for r in stored)
    assert all(r.domain == "ops" and r.task_type == "deploy" for r in stored)


def test_task_end_promotes_what_matters_and_clears_the_rest(ltm: LongTermMemory) -> None:
    keep = ltm.remember("the API rate limit is 50/s", agent="a", scope="task", task_id="t1",
                        project="p", importance=0.8)  # fmt: skip
    drop = ltm.remember("tried port 8080", agent="a", scope="task", task_id="t1",
                        project="p", importance=0.3)  # fmt: skip
    other = ltm.remember("other task note", agent="a", scope="task", task_id="t2", project="p")
    report = ltm.end_task("t1", success=True, goal=None, project="p")
    assert report.promoted == [keep.id] and report.cleared == [drop.id]
    promoted = ltm.backend.get(keep.id)
    assert promoted is not None and promoted.tier is Tier.PROJECT and promoted.project == "p"
    assert ltm.backend.get(drop.id) is None
    assert ltm.backend.get(other.id) is not None


def test_td_values_move_toward_the_outcome(ltm: LongTermMemory) -> None:
    hint = ltm.remember("run migrations before tests", agent="a", scope="global")
    trap = ltm.remember("skip the migrations step", agent="a", scope="global")
    ltm.recall("migrations", agent="a", task_id="ok")
    ok = ltm.end_task("ok", success=True, goal="db/migrate")
    ltm.recall("skip the migrations step", agent="a", task_id="bad", k=1)
    bad = ltm.end_task("bad", success=False, goal="db/migrate")
    assert ok.value_updates[hint.id][1] > ok.value_updates[hint.id][0] == 0.5
    assert bad.value_updates[trap.id][1] < bad.value_updates[trap.id][0]
    assert hint.id not in bad.value_updates  # not retrieved in that task
    stored = ltm.backend.get(hint.id)
    assert stored is not None and stored.goal_values["db/migrate"] > 0.5


def test_context_for_splits_the_budget_by_tier(ltm: LongTermMemory) -> None:
    for i in range(5):
        pad = "x" * 80
        ltm.remember(f"deploy task note {i} {pad}", agent="a", scope="task", task_id="t",
                     project="p")  # fmt: skip
        ltm.remember(f"deploy project note {i} {pad}", agent="a", scope="project", project="p")
        ltm.remember(f"deploy global note {i} {pad}", agent="a", scope="global")
    picked = ltm.context_for("deploy note", agent="a", project="p", task_id="t",
                             max_tokens=1000, count_tokens=len)  # fmt: skip
    by_tier = {t: sum(len(m.content) for m in picked if m.record.tier is t) for t in Tier}
    assert sum(by_tier.values()) <= 1000
    assert by_tier[Tier.TASK] <= 400 and by_tier[Tier.PROJECT] <= 400
    assert by_tier[Tier.GLOBAL] >= 100


def test_context_for_gives_an_unused_share_to_the_others(ltm: LongTermMemory) -> None:
    for i in range(8):
        ltm.remember(f"deploy global note {i} " + "x" * 80, agent="a", scope="global")
    picked = ltm.context_for("deploy note", agent="a", project="p", task_id="t",
                             max_tokens=1000, count_tokens=len)  # fmt: skip
    assert sum(len(m.content) for m in picked) > 200  # more than the global 20 %


# -- reflection -----------------------------------------------------------------------
class ScriptedReflector:
    """Asks one fixed question and turns whatever it is shown into one insight."""

    def __init__(self, offline: bool = False) -> None:
        self.offline = offline
        self.asked: list[int] = []

    async def questions(self, memories: Sequence[MemoryRecord]) -> list[str]:
        self.asked.append(len(memories))
        return ["what keeps breaking the deploy"]

    async def insights(self, question: str, memories: Sequence[MemoryRecord]) -> list[str]:
        return [f"{len(memories)} memories say the deploy breaks on config drift"]


async def test_reflection_waits_for_the_importance_threshold(ltm: LongTermMemory) -> None:
    reflector = ScriptedReflector()
    # threshold 20 points; importance 0.5 is 5.5 points
    for i in range(3):
        ltm.remember(f"deploy broke on config drift {i}", agent="a", scope="global", importance=0.5)
    assert await ltm.maybe_reflect("a", reflector) == []
    assert reflector.asked == []
    ltm.remember("deploy broke on config drift 3", agent="a", scope="global", importance=0.5)
    written = await ltm.maybe_reflect("a", reflector)
    assert len(written) == 1
    insight = written[0]
    assert insight.kind is MemoryKind.SEMANTIC and insight.importance == 0.8
    assert len(insight.source_ids) == 4
    assert set(insight.source_ids) <= {r.id for r in ltm.backend.list_all()}
    assert await ltm.maybe_reflect("a", reflector) == []  # the count starts again


async def test_the_offline_reflector_is_skipped_when_turned_off(ltm: LongTermMemory) -> None:
    for i in range(10):
        ltm.remember(f"deploy note {i}", agent="a", scope="global", importance=1.0)
    offline = ScriptedReflector(offline=True)
    ltm.settings = MemorySettings(reflection_threshold=20, reflect_offline=False)
    assert await ltm.maybe_reflect("a", offline) == []
    ltm.settings = MemorySettings(reflection_threshold=20, reflect_offline=True)
    assert len(await ltm.maybe_reflect("a", offline)) == 1


# -- bulk -------------------------------------------------------------------------------
def test_import_reports_bad_lines_and_keeps_ids(ltm: LongTermMemory) -> None:
    lines = [
        '{"id": "c1", "content": "Caroline went to the LGBTQ support group", '
        '"timestamp": "2023-05-08T13:56:00Z", "tags": ["s1"]}',
        '{"id": "c2"}',
        "{oops",
        "",
        '{"content": "  "}',
        '{"content": "a", "importance": 3}',
        '{"content": "a", "timestamp": "last tuesday"}',
        '{"id": "c3", "content": "Melanie paints sunsets", "speaker": "Melanie"}',
    ]
    report = ltm.import_jsonl(lines, project="locomo")
    assert report.imported == 2
    assert [e.split(":")[0] for e in report.errors] == [
        "line 2", "line 3", "line 5", "line 6", "line 7",
    ]  # fmt: skip
    assert report.errors[0] == "line 2: content is missing"
    assert report.warnings == ["ignored unknown fields: speaker"]
    c1 = ltm.backend.get("c1")
    assert c1 is not None and c1.project == "locomo" and c1.tier is Tier.PROJECT
    assert c1.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    found = ltm.recall("support group", agent="a", project="locomo", record_access=False)
    assert [m.id for m in found] == ["c1"]


def test_export_then_import_restores_the_store(ltm: LongTermMemory, tmp_path: Path) -> None:
    ltm.remember("first", agent="a", scope="project", project="p", tags=["x"], at=NOW)
    ltm.remember("second", agent="b", scope="global", preference=True, at=NOW)
    exported = [json.dumps(line) for line in ltm.export()]
    with LongTermMemory(tmp_path / "copy.db") as copy:
        report = copy.import_jsonl(exported)
        assert report.imported == 2 and not report.errors
        assert {r.id: r for r in copy.backend.list_all()} == {
            r.id: r for r in ltm.backend.list_all()
        }


def test_stats_count_by_tier_kind_status_and_project(ltm: LongTermMemory) -> None:
    ltm.remember("a", agent="a", scope="project", project="p")
    ltm.remember("b", agent="a", scope="global", preference=True)
    stats = ltm.stats()
    assert stats["total"] == 2
    assert stats["by_tier"] == {"project": 1, "global": 1}
    assert stats["by_status"] == {"active": 1, "proposed": 1}
    assert stats["by_project"] == {"p": 1}


def test_a_small_project_in_a_big_store_still_gets_all_its_matches(hive: Hive) -> None:
    big = [json.dumps({"content": f"database note {i} of the big project"}) for i in range(300)]
    with LongTermMemory(hive) as ltm:
        ltm.import_jsonl(big, project="big")
        for i in range(3):
            ltm.remember(f"database note {i}", agent="a", scope="project", project="small", at=NOW)
        found = ltm.recall("database note", agent="a", project="small", k=10)
    assert sorted(m.content for m in found) == [f"database note {i}" for i in range(3)]


def test_importance_points_added_from_several_threads_at_once_are_all_counted(
    hive: Hive,
) -> None:
    # Two remembers of one round used to run in two threads and lose one's points.
    with LongTermMemory(hive) as store:
        barrier = threading.Barrier(4)

        def add_many() -> None:
            barrier.wait()
            for _ in range(25):
                store.counter.add("ann", "apiary", 1.0)

        threads = [threading.Thread(target=add_many) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.counter.points("ann", "apiary") == 100.0
