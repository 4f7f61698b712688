"""What makes a task end cheap, and proof that it changes nothing.

The SQLite backend's in-process counts (its ledger) must be exact after any write of
ours (including rolled-back ones), and never stale after another connection — another
store object, another process such as the `hivemind memory` CLI or a daemon worker —
writes the same file. A plain sqlite3 connection is the oracle: it reads the file
without any of our code. Pruning ranks lean candidates exactly as whole records.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from hivemind.errors import StoreError
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.models import Task, TaskState
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.ref import TaskRef
from hivemind.ltm import sqlite as sqlite_module
from hivemind.ltm.learning import trace_key
from hivemind.ltm.records import MemoryRecord, MemoryStatus, TaskEndReport, Tier
from hivemind.ltm.retention import EVICTABLE, RetentionPolicy, prune_agent
from hivemind.ltm.retrieval import recency
from hivemind.ltm.scopes import GLOBAL_SCOPE, scope_key
from hivemind.ltm.sqlite import SQLiteBackend
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.blocks import ContextBlock, HistoryBlock
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools.base import ToolContext
from hivemind.tools.memory import end_task_memory
from tests.test_ltm_backend import T0, rec

AGENTS = ["ann", "bob", None]
TASKS = ["t0", "t1", "t2"]
META_KEYS = ["traces:t0", "traces:t1", "points:ann"]
SCOPES = [GLOBAL_SCOPE, "project:p", *(scope_key("task", None, t) for t in TASKS)]


def task_scope(task_id: str) -> str:
    return scope_key("task", None, task_id)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def ours(db: Path) -> Iterator[SQLiteBackend]:
    store = SQLiteBackend(db)
    yield store
    store.close()


@pytest.fixture
def theirs(db: Path, ours: SQLiteBackend) -> Iterator[SQLiteBackend]:
    """Another connection to the same file: what another process does, seen from ours."""
    store = SQLiteBackend(db)
    yield store
    store.close()


class Oracle:
    """The truth, read with plain SQL on a connection of its own."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)

    def one(self, sql: str, *params: object) -> object:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def check(self, store: SQLiteBackend) -> None:
        assert store.count() == self.one("SELECT count(*) FROM memories")
        for agent in AGENTS[:2]:
            for scope in SCOPES:
                assert store.evictable_count(agent, scope) == self.one(  # type: ignore[arg-type]
                    "SELECT count(*) FROM memories WHERE agent = ? AND preference = 0 "
                    "AND status = 'active' AND scope = ?",
                    agent, scope,
                )  # fmt: skip
        for task in TASKS:
            assert store.task_memory_count(task_scope(task)) == self.one(
                "SELECT count(*) FROM memories WHERE tier = 'task' AND task_id = ?", task
            )
        for key in META_KEYS:
            assert store.meta_get(key) == self.one("SELECT value FROM meta WHERE key = ?", key)


def random_record(rnd: random.Random, memory_id: str) -> MemoryRecord:
    tier = rnd.choice(list(Tier))
    return rec(
        memory_id,
        agent=rnd.choice(AGENTS),
        tier=tier,
        project="p" if tier is Tier.PROJECT else None,
        task_id=rnd.choice(TASKS) if tier is Tier.TASK else None,
        preference=rnd.random() < 0.3,
        status=MemoryStatus.PROPOSED if rnd.random() < 0.2 else MemoryStatus.ACTIVE,
        importance=round(rnd.random(), 2),
    )


def random_write(rnd: random.Random, store: SQLiteBackend, step: int) -> None:
    """One of every kind of write: add, replace (any field changed), delete, clear, meta,
    touch, and a transaction that rolls back."""
    ids = list(dict.fromkeys(r.id for r in store.list_all()))  # scopes may share an id
    kind = rnd.randrange(7)
    if kind == 0 or not ids:
        store.add_many([random_record(rnd, f"m{step}-{i}") for i in range(rnd.randint(1, 3))])
    elif kind == 1:
        store.add_many([random_record(rnd, i) for i in rnd.sample(ids, min(2, len(ids)))])
    elif kind == 2:
        store.delete_many([*rnd.sample(ids, min(2, len(ids))), "no-such-id"])
    elif kind == 3:
        store.clear(rnd.choice([{"agent": "bob"}, {"tier": Tier.TASK, "task_id": "t1"}]))
    elif kind == 4:
        store.meta_set(rnd.choice(META_KEYS), rnd.choice([None, f"v{step}"]))
    elif kind == 5:
        store.touch(ids[:2], rec("x").created_at)
    else:
        with pytest.raises(RuntimeError), store.transaction():
            store.add_many([random_record(rnd, f"gone{step}")])
            store.delete_many(ids[:1])
            store.meta_set("traces:t0", "undone")
            raise RuntimeError("rolled back")


@pytest.mark.parametrize("seed", range(8))
def test_the_counts_follow_every_write_of_ours(ours: SQLiteBackend, db: Path, seed: int) -> None:
    oracle = Oracle(db)
    rnd = random.Random(seed)
    for step in range(60):
        oracle.check(ours)  # also (re)loads every count before the next write
        random_write(rnd, ours, step)
    oracle.check(ours)


def test_a_meta_table_too_big_to_keep_is_read_key_by_key(
    ours: SQLiteBackend, theirs: SQLiteBackend, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "_META_CACHED_MAX", 1)
    oracle = Oracle(db)
    ours.meta_set("traces:t0", "a")
    ours.meta_set("points:ann", "1")
    oracle.check(ours)
    oracle.check(ours)  # asked twice: the whole table would be read, but it is too big
    theirs.meta_set("traces:t1", "b")
    theirs.meta_set("traces:t0", None)
    oracle.check(ours)
    facts = ours.task_end_facts(task_scope("t1"), trace_key("t1"), None, GLOBAL_SCOPE)
    assert facts is not None and facts.has_meta


def test_a_write_that_fails_half_way_leaves_no_wrong_count(ours: SQLiteBackend, db: Path) -> None:
    """Inside a transaction that still commits, a failed statement keeps what ran before it."""
    oracle = Oracle(db)
    ours.add_many([rec("a1", agent="ann")])
    oracle.check(ours)
    with ours.transaction():
        with pytest.raises(StoreError):  # the same new id twice: the second insert fails
            ours.add_many([rec("a1", agent="bob"), rec("n1", agent="ann"), rec("n1", agent="ann")])
        ours.count()  # the ledger is asked again before the commit
    oracle.check(ours)


def test_writes_of_another_connection_are_seen_by_every_count(
    ours: SQLiteBackend, theirs: SQLiteBackend, db: Path
) -> None:
    oracle = Oracle(db)
    ours.add_many([rec("a1", agent="ann"), rec("t1a", tier=Tier.TASK, task_id="t1")])
    oracle.check(ours)  # every count known to ours now
    theirs.add_many(
        [rec("a2", agent="ann"), rec("b1", agent="bob"), rec("t1b", tier=Tier.TASK, task_id="t1")]
    )
    theirs.meta_set("traces:t1", '{"a1": 1.0}')
    oracle.check(ours)
    theirs.delete_many(["a1", "t1a"])
    theirs.meta_set("points:ann", "12")
    oracle.check(ours)
    theirs.clear()
    oracle.check(ours)


def test_facts_read_while_another_connection_commits_are_not_trusted(
    ours: SQLiteBackend, theirs: SQLiteBackend
) -> None:
    """Facts that needed queries hold at one instant only if nobody committed meanwhile."""
    committed: list[str] = []

    def commit_meanwhile(sql: str) -> None:
        if "GROUP BY scope" in sql and not committed:
            theirs.add(rec("late", tier=Tier.TASK, task_id="t1"))
            committed.append(sql)

    ours._conn.set_trace_callback(commit_meanwhile)
    assert ours.task_end_facts(task_scope("t1"), trace_key("t1"), "ann", GLOBAL_SCOPE) is None
    ours._conn.set_trace_callback(None)
    assert committed
    facts = ours.task_end_facts(task_scope("t1"), trace_key("t1"), "ann", GLOBAL_SCOPE)
    assert facts is not None and facts.task_memories == 1


# -- the task end -------------------------------------------------------------------
def test_a_task_end_with_nothing_to_do_writes_nothing(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        ltm.remember("the CI runner has 2 cores", agent="ann", scope="global")
        ltm.end_task("t0", success=True, goal=None, agent="ann")  # counts now known
        before = ltm.backend.version()
        report = ltm.end_task(
            "t1", success=False, goal="ops/deploy", history=[HistoryBlock(action="ls")],
            agent="ann",
        )  # fmt: skip
        assert report == TaskEndReport(task_id="t1", success=False, goal="ops/deploy")
        assert ltm.backend.version() == before


def test_a_task_memory_written_by_another_store_is_cleared_at_task_end(hive: Hive) -> None:
    with LongTermMemory(hive) as ours, LongTermMemory(hive) as theirs:
        assert ours.end_task("t1", success=True, goal=None, agent="a").cleared == []
        note = theirs.remember("scratch: port 8081", agent="a", scope="task", task_id="t1",
                               project="p", importance=0.1)  # fmt: skip
        kept = theirs.remember("the API limit is 50/s", agent="a", scope="task", task_id="t1",
                               project="p", importance=0.9)  # fmt: skip
        report = ours.end_task("t1", success=True, goal=None, agent="a", project="p")
        assert report.cleared == [note.id] and report.promoted == [kept.id]
        t1 = scope_key("task", "p", "t1")
        assert theirs.backend.task_memory_count(t1) == 0  # type: ignore[attr-defined]


def test_traces_recorded_by_another_store_are_learned_or_forgotten(hive: Hive) -> None:
    with LongTermMemory(hive) as ours, LongTermMemory(hive) as theirs:
        hint = ours.remember("run migrations before tests", agent="a", scope="global")
        assert ours.end_task("t0", success=True, goal="db/migrate").value_updates == {}
        theirs.recall("migrations", agent="a", task_id="t1")
        theirs.recall("migrations", agent="a", task_id="t2")
        learned = ours.end_task("t1", success=True, goal="db/migrate")
        assert learned.value_updates[hint.id][1] > 0.5
        ours.end_task("t2", success=True, goal=None)  # no goal: the traces are dropped
        assert theirs.backend.meta_get(trace_key("t2")) is None


def test_a_task_end_prunes_what_the_cli_added_meanwhile(hive: Hive) -> None:
    """A real second process (`hivemind memory add`) while this store is open."""
    with LongTermMemory(hive, policy=RetentionPolicy(max_per_agent=3)) as ltm:
        for i in range(3):
            ltm.remember(f"note {i}", agent="ann", scope="global", importance=0.9)
        assert ltm.end_task("t0", success=True, goal=None, agent="ann").pruned == []
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        subprocess.run(
            [sys.executable, "-m", "hivemind", "memory", "add", "a passing remark",
             "--agent", "ann", "--importance", "0", "--hive", str(hive.root)],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        report = ltm.end_task("t1", success=True, goal=None, agent="ann")
        assert len(report.pruned) == 1
        assert [r.content for r in ltm.backend.query({"agent": "ann"})].count("note 0") == 1
        assert ltm.backend.query({"id": report.pruned[0]}) == []


def test_end_task_memory_consolidates_the_tasks_own_history_only(hive: Hive) -> None:
    worth = "we decided to never deploy on Friday: the release failed, critical"
    working = WorkingMemoryManager()
    for i, (tasks, detail) in enumerate([
        (["t1", "t2"], f"{worth} (1)"), (["t2"], f"{worth} (2)"), (["t1"], "ls"),
        (["t1"], f"{worth} (3)"), ([], f"{worth} (4)"),
    ]):  # fmt: skip
        working.add(HistoryBlock(id=f"h{i}", action="note", detail=detail,
                                 metadata={"task_ids": tasks}))  # fmt: skip
    working.add(ContextBlock(id="c", context_type="memory", summary=worth,
                             metadata={"task_ids": ["t1"]}))  # fmt: skip
    with LongTermMemory(hive) as ltm:
        ctx = ToolContext(
            hive=hive, agent="ann", config=AgentConfig(name="ann"),
            board=TaskBoard(hive, settle_time=0), post=PostOffice(hive), working=working,
            active_tasks={}, ltm=ltm,
        )  # fmt: skip
        ref = TaskRef(task=Task(id="t1", project="p"), path=hive.tasks_dir / "t1.md",
                      state=TaskState.ACTIVE)  # fmt: skip
        entry = end_task_memory(ctx, ref, success=True)
        assert entry is not None and ctx.effects.memories == [entry]
        assert entry["op"] == "end_task" and entry["task_id"] == "t1" and entry["success"]
        stored = ltm.backend.get_many(entry["consolidated"])
        assert [r.content for r in stored] == [f"note: {worth} (1)", f"note: {worth} (3)"]


@pytest.mark.parametrize("seed", range(3))
def test_pruning_ranks_candidates_as_whole_records(ours: SQLiteBackend, seed: int) -> None:
    """Ties included (few importances, shared times): the same ids go, in the same order."""
    rnd = random.Random(seed)
    at = T0 + timedelta(days=30)
    times = [T0 + timedelta(days=rnd.randrange(60)) for _ in range(8)]
    ours.add_many([
        rec(f"m{i}", agent="ann", importance=rnd.choice([0.1, 0.5, 0.9]),
            created_at=(made := rnd.choice(times)), last_accessed=max(made, rnd.choice(times)))
        for i in range(120)
    ])  # fmt: skip
    policy = RetentionPolicy(max_per_agent=70, half_life_hours=24.0 * rnd.choice([1, 30]))
    share = policy.importance_share
    mine = {**EVICTABLE, "agent": "ann", "scope": GLOBAL_SCOPE}
    before = ours.query(mine, order_by="created_at")
    expected = sorted(  # the ranking as it was written before candidates existed
        before,
        key=lambda r: share * r.importance
        + (1 - share) * recency(r, at, policy.half_life_hours),
    )[: len(before) - 70]
    assert [c.id for c in ours.prune_candidates(mine)] == [r.id for r in before]
    assert prune_agent(ours, "ann", policy, at, GLOBAL_SCOPE) == [r.id for r in expected]
    assert ours.evictable_count("ann", GLOBAL_SCOPE) == 70


def test_a_task_end_on_a_closed_store_says_so(hive: Hive) -> None:
    ltm = LongTermMemory(hive)
    ltm.close()
    with pytest.raises(StoreError, match="closed"):
        ltm.end_task("t1", success=True, goal=None, agent="ann")


def test_an_empty_store_finds_what_another_store_remembers_next(hive: Hive) -> None:
    """Recall skips the search while the store is empty, by a count that follows other
    connections' commits: the first memory anyone adds is found at once."""
    with LongTermMemory(hive) as ours, LongTermMemory(hive) as theirs:
        assert ours.recall("deploy", agent="a") == []  # empty: the count is now known
        theirs.remember("deploy on Fridays is forbidden", agent="b", scope="global")
        assert [m.content for m in ours.recall("deploy", agent="a")] == [
            "deploy on Fridays is forbidden"
        ]
        theirs.backend.delete_many([r.id for r in theirs.backend.list_all()])
        assert ours.recall("deploy", agent="a") == []
