"""Project isolation in long-term memory: a memory's identity is its scope plus its id.

Chat logs number their turns per conversation (`D1:1 … D19:40`), so two projects
imported from two logs share every id. No import, `remember`, consolidation or
eviction of one project (or task) may change, move or evict a memory of another,
and capacity (`[memory] max_items`) is counted per scope.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.errors import MemoryFullError
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.base import ToolCall
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.schema import SCHEMA_VERSION, migrate
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.blocks import HistoryBlock
from hivemind.memory.keys import generate_memory_key
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig, MemorySettings
from hivemind.tools import default_registry
from hivemind.tools.base import ToolContext
from tests.helpers import write_agent, write_task

runner = CliRunner()
WHEN = datetime(2024, 5, 1, tzinfo=UTC)


def chat_log(tmp_path: Path, name: str, conversations: int, turns: int) -> Path:
    """A JSONL chat log whose ids restart with every log: `D1:1 … D<c>:<t>`."""
    path = tmp_path / name
    lines = [
        {"id": f"D{c}:{t}", "content": f"{name} conversation {c} turn {t}"}
        for c in range(1, conversations + 1)
        for t in range(1, turns + 1)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def cli(hive: Hive, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memory", *args, "--hive", str(hive.root)])
    return result.exit_code, result.stdout, result.stderr


def found_in(hive: Hive, project: str) -> list[dict[str, Any]]:
    """What `memory search --project` finds of every imported turn."""
    code, out, _ = cli(hive, "search", "conversation turn", "--project", project, "--k", "1000",
                       "--json")  # fmt: skip
    assert code == 0
    results: list[dict[str, Any]] = json.loads(out)
    return results


def memories(ltm: LongTermMemory, project: str) -> dict[str, str]:
    """id → content of a project's memories."""
    return {r.id: r.content for r in ltm.backend.query({"tier": "project", "project": project})}


# -- import ------------------------------------------------------------------------
def test_two_projects_importing_the_same_ids_keep_every_memory(
    hive: Hive, tmp_path: Path
) -> None:
    code, _, _ = cli(hive, "import", str(chat_log(tmp_path, "a.jsonl", 3, 7)), "--project", "p26")
    assert code == 0
    code, out, _ = cli(hive, "import", str(chat_log(tmp_path, "b.jsonl", 2, 7)), "--project", "p30")
    assert code == 0
    assert "imported 14 memories from" in out  # all new: none was p26's to update
    p26, p30 = found_in(hive, "p26"), found_in(hive, "p30")
    assert len(p26) == 21 and all(m["content"].startswith("a.jsonl") for m in p26)
    assert len(p30) == 14 and all(m["content"].startswith("b.jsonl") for m in p30)
    assert {m["id"] for m in p30} < {m["id"] for m in p26}
    _, stats, _ = cli(hive, "stats", "--json")
    assert json.loads(stats)["by_project"] == {"p26": 21, "p30": 14}


def test_reimporting_into_one_project_updates_only_that_project(
    hive: Hive, tmp_path: Path
) -> None:
    cli(hive, "import", str(chat_log(tmp_path, "a.jsonl", 1, 3)), "--project", "p26")
    cli(hive, "import", str(chat_log(tmp_path, "b.jsonl", 1, 3)), "--project", "p30")
    edited = tmp_path / "edit.jsonl"
    edited.write_text(json.dumps({"id": "D1:2", "content": "p30 turn two, edited"}) + "\n")
    code, out, _ = cli(hive, "import", str(edited), "--project", "p30")
    assert code == 0 and "(0 new, 1 updated)" in out
    with LongTermMemory(hive) as ltm:
        assert memories(ltm, "p26")["D1:2"] == "a.jsonl conversation 1 turn 2"
        assert memories(ltm, "p30")["D1:2"] == "p30 turn two, edited"


def test_a_line_naming_no_scope_with_its_id_in_two_projects_is_refused(
    hive: Hive, tmp_path: Path
) -> None:
    cli(hive, "import", str(chat_log(tmp_path, "a.jsonl", 1, 2)), "--project", "p26")
    cli(hive, "import", str(chat_log(tmp_path, "b.jsonl", 1, 2)), "--project", "p30")
    loose = tmp_path / "loose.jsonl"
    loose.write_text(json.dumps({"id": "D1:1", "content": "which one?"}) + "\n")
    code, _, err = cli(hive, "import", str(loose))
    assert code == 1
    assert "line 1: id D1:1 is in 2 scopes (project p26, project p30)" in err
    assert [m["content"] for m in found_in(hive, "p26") if m["id"] == "D1:1"] == [
        "a.jsonl conversation 1 turn 1"
    ]


def test_an_export_of_two_projects_sharing_ids_imports_back_whole(
    hive: Hive, tmp_path: Path
) -> None:
    cli(hive, "import", str(chat_log(tmp_path, "a.jsonl", 1, 4)), "--project", "p26")
    cli(hive, "import", str(chat_log(tmp_path, "b.jsonl", 1, 4)), "--project", "p30")
    _, exported, _ = cli(hive, "export")
    other = Hive(tmp_path / "other").ensure()
    dump = tmp_path / "dump.jsonl"
    dump.write_text(exported)
    code, out, err = cli(other, "import", str(dump))
    assert code == 0 and "imported 8 memories" in out and "skipped" not in err
    assert len(found_in(other, "p26")) == len(found_in(other, "p30")) == 4


def test_forget_deletes_one_projects_memory_and_refuses_to_guess(
    hive: Hive, tmp_path: Path
) -> None:
    cli(hive, "import", str(chat_log(tmp_path, "a.jsonl", 1, 2)), "--project", "p26")
    cli(hive, "import", str(chat_log(tmp_path, "b.jsonl", 1, 2)), "--project", "p30")
    code, _, err = cli(hive, "forget", "D1:1")
    assert code == 1 and "id D1:1 is in 2 scopes (project p26, project p30)" in err
    assert len(found_in(hive, "p30")) == 2
    code, out, _ = cli(hive, "forget", "D1:1", "--project", "p30")
    assert code == 0 and "forgot D1:1" in out
    assert [m["id"] for m in found_in(hive, "p30")] == ["D1:2"]
    assert sorted(m["id"] for m in found_in(hive, "p26")) == ["D1:1", "D1:2"]


def test_recall_touch_and_learning_address_each_scopes_own_memory(tmp_path: Path) -> None:
    with LongTermMemory(tmp_path / "memory.db") as ltm:
        for project, text in [(None, "a global turn"), ("p26", "a p26 turn"),
                              ("p30", "a p30 turn")]:  # fmt: skip
            ltm.import_jsonl([json.dumps({"id": "D1:1", "content": text})], project=project)
        found = ltm.recall("turn", agent="ann", project="p26", task_id="a1", at=WHEN)
        ltm.end_task("a1", success=True, goal="chat/answer", project="p26")
        stored = {r.project: r for r in ltm.backend.list_all()}
    assert sorted(m.content for m in found) == ["a global turn", "a p26 turn"]
    assert [m.id for m in found] == ["D1:1", "D1:1"]
    assert stored["p26"].access_count == stored[None].access_count == 1
    assert stored["p26"].goal_values == {"chat/answer": pytest.approx(0.65)}
    assert stored["p30"].access_count == 0 and stored["p30"].goal_values == {}


# -- capacity ------------------------------------------------------------------------
def test_one_projects_writes_at_capacity_never_evict_anothers(tmp_path: Path) -> None:
    settings = MemorySettings(max_items=10)
    with LongTermMemory(tmp_path / "memory.db", settings) as ltm:
        ltm.import_jsonl(chat_log(tmp_path, "a.jsonl", 2, 5).read_text().splitlines(),
                         project="p26")  # fmt: skip
        before = memories(ltm, "p26")
        report = ltm.import_jsonl(
            chat_log(tmp_path, "b.jsonl", 3, 5).read_text().splitlines(), project="p30"
        )
        for i in range(12):
            ltm.remember(f"p30 note {i}", agent="bob", scope="project", project="p30",
                         importance=0.9)  # fmt: skip
        assert report.evicted == 5  # p30's own overflow, from p30
        assert memories(ltm, "p26") == before and len(before) == 10
        assert len(memories(ltm, "p30")) == 10


def test_a_write_to_a_full_scope_with_nothing_evictable_is_refused_with_a_reason(
    tmp_path: Path,
) -> None:
    settings = MemorySettings(max_items=10)
    with LongTermMemory(tmp_path / "memory.db", settings) as ltm:
        for i in range(10):
            ltm.remember(f"house rule {i}", agent="ann", scope="project", project="p26",
                         preference=True)  # fmt: skip
        with pytest.raises(MemoryFullError, match="project p26 is full: it holds 10 memories"):
            ltm.remember("one more", agent="ann", scope="project", project="p26")
        report = ltm.import_jsonl([json.dumps({"id": "D1:1", "content": "a turn"})],
                                  project="p26")  # fmt: skip
        assert report.imported == 0 and report.errors[0].startswith("line 1: project p26 is full")
        ltm.remember("p30 is not full", agent="ann", scope="project", project="p30")
        assert len(memories(ltm, "p26")) == 10 and len(memories(ltm, "p30")) == 1


# -- the remember and recall tools, consolidation ------------------------------------
def tool_ctx(hive: Hive, ltm: LongTermMemory, agent: str, task: str, project: str) -> ToolContext:
    write_agent(hive, agent)
    write_task(hive, task, f"Work on {project}.", front=f"project: {project}\n")
    board = TaskBoard(hive, settle_time=0)
    [ref] = [r for r in board.scan_pending() if r.task.id == task]
    claimed = board.claim(ref, agent)
    assert claimed is not None
    return ToolContext(
        hive=hive, agent=agent, config=AgentConfig(name=agent), board=board,
        post=PostOffice(hive), working=WorkingMemoryManager(), active_tasks={task: claimed},
        ltm=ltm,
    )  # fmt: skip


async def call(ctx: ToolContext, name: str, **args: object) -> tuple[bool, str]:
    result = await default_registry().execute(ctx, ToolCall(id="c", name=name, input=args))
    return result.is_error, result.content


async def test_remember_in_one_project_at_capacity_leaves_the_other_whole(
    hive: Hive, tmp_path: Path
) -> None:
    with LongTermMemory(hive, MemorySettings(max_items=10)) as ltm:
        ltm.import_jsonl(chat_log(tmp_path, "a.jsonl", 2, 5).read_text().splitlines(),
                         project="p26")  # fmt: skip
        ltm.import_jsonl(chat_log(tmp_path, "b.jsonl", 2, 5).read_text().splitlines(),
                         project="p30")  # fmt: skip
        p26 = memories(ltm, "p26")
        bob = tool_ctx(hive, ltm, "bob", "b1", "p30")
        for i in range(12):
            failed, _ = await call(bob, "remember", content=f"p30 lesson {i}", importance=0.9)
            assert not failed
        ann = tool_ctx(hive, ltm, "ann", "a1", "p26")
        _, found = await call(ann, "recall", query="conversation 1 turn 3", k=20)
        assert memories(ltm, "p26") == p26
        assert len(memories(ltm, "p30")) == 10
    assert "[D1:3]" in found and "a.jsonl conversation 1 turn 3" in found
    assert "b.jsonl" not in found


async def test_remember_into_a_full_project_tells_the_agent_why(hive: Hive) -> None:
    with LongTermMemory(hive, MemorySettings(max_items=10)) as ltm:
        for i in range(10):
            ltm.remember(f"house rule {i}", agent="h", scope="project", project="p26",
                         preference=True)  # fmt: skip
        ann = tool_ctx(hive, ltm, "ann", "a1", "p26")
        failed, said = await call(ann, "remember", content="a new lesson")
    assert failed and "project p26 is full" in said and "max_items" in said


async def test_task_end_consolidates_and_promotes_into_its_own_project_only(
    hive: Hive, tmp_path: Path
) -> None:
    with LongTermMemory(hive, MemorySettings(max_items=10)) as ltm:
        ltm.import_jsonl(chat_log(tmp_path, "b.jsonl", 2, 5).read_text().splitlines(),
                         project="p30")  # fmt: skip
        ltm.import_jsonl([json.dumps({"id": "D1:1", "content": "p26's own first turn"})],
                         project="p26")  # fmt: skip
        # A task memory of p26 with an id p26 already uses, and one of p30's task.
        ltm.import_jsonl([json.dumps({"id": "D1:1", "content": "the API limit is 50/s",
                                      "tier": "task", "task_id": "a1", "importance": 0.9})],
                         project="p26")  # fmt: skip
        p30 = memories(ltm, "p30")
        ann = tool_ctx(hive, ltm, "ann", "a1", "p26")
        bob = tool_ctx(hive, ltm, "bob", "b1", "p30")
        _, _ = await call(bob, "remember", content="p30 scratch", scope="task")
        ann.working.add(HistoryBlock(
            action="note", detail="we decided never to deploy on Friday, critical",
            metadata={"task_ids": ["a1"], "importance": 0.9},
        ))  # fmt: skip
        failed, _ = await call(ann, "complete_task", task_id="a1", result="done")
        assert not failed
        end = next(m for m in ann.effects.memories if m["op"] == "end_task")
        kept = memories(ltm, "p26")
        assert memories(ltm, "p30") == p30
        assert ltm.backend.count({"tier": "task", "project": "p30"}) == 1
    assert kept["D1:1"] == "p26's own first turn"  # the promoted memory got a new id
    [promoted] = end["promoted"]
    assert promoted != "D1:1" and kept[promoted] == "the API limit is 50/s"
    [consolidated] = end["consolidated"]
    assert "never to deploy on Friday" in kept[consolidated]


def test_a_task_end_into_a_full_project_says_why_and_still_ends(tmp_path: Path) -> None:
    with LongTermMemory(tmp_path / "memory.db", MemorySettings(max_items=10)) as ltm:
        for i in range(10):
            ltm.remember(f"house rule {i}", agent="h", scope="project", project="p26",
                         preference=True)  # fmt: skip
        ltm.remember("the API limit is 50/s", agent="ann", scope="task", project="p26",
                     task_id="a1", importance=0.9)  # fmt: skip
        report = ltm.end_task(
            "a1", success=True, goal=None, project="p26", agent="ann",
            history=[HistoryBlock(action="note", detail="never deploy on Friday, critical",
                                  metadata={"importance": 0.9})],
        )  # fmt: skip
        left = ltm.backend.count({"project": "p26"})
    assert report.consolidated == report.promoted == [] and len(report.cleared) == 1
    assert len(report.refused) == 2 and all("project p26 is full" in r for r in report.refused)
    assert left == 10


# -- migration -----------------------------------------------------------------------
def version_3_store(path: Path, rows: list[MemoryRecord]) -> None:
    """A memory.db as hivemind left it before scopes: schema v3 (`migrate(target=3)`, the
    released migrations, where `id` is UNIQUE store-wide), rows inserted as its backend
    did (labels filled, then indexed in bulk)."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=3)
    for r in rows:
        conn.execute(
            "INSERT INTO memories (id, key, content, tier, project, agent, task_id, tags, "
            "importance, created_at, last_accessed, preference, labels) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (r.id, r.key, r.content, r.tier.value, r.project, r.agent, r.task_id,
             json.dumps(r.tags), r.importance, WHEN.timestamp(), WHEN.timestamp(),
             int(r.preference), " ".join(r.tags)),
        )  # fmt: skip
    conn.execute("INSERT INTO memories_fts (rowid, content, labels) "
                 "SELECT rowid, content, labels FROM memories")  # fmt: skip
    conn.close()


def old_rows() -> list[MemoryRecord]:
    def row(memory_id: str, text: str, **fields: Any) -> MemoryRecord:
        return MemoryRecord(id=memory_id, key=generate_memory_key(text), content=text, **fields)

    return [
        *(row(f"D1:{t}", f"p26 conversation turn {t}", tier="project", project="p26",
              tags=["chat"]) for t in range(1, 6)),
        row("g1", "every conversation is logged", tags=["policy"]),
        row("pref", "answer in English", tier="project", project="p26", preference=True),
        row("t-1", "scratch for task t1", tier="task", project="p26", task_id="t1"),
    ]


def schema_of(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def test_an_old_store_is_migrated_on_first_write_and_loses_nothing(
    hive: Hive, tmp_path: Path
) -> None:
    rows = old_rows()
    version_3_store(hive.memory_db, rows)
    _, stats, _ = cli(hive, "stats", "--json")  # a look reads an upgraded private copy
    assert json.loads(stats)["total"] == len(rows) and schema_of(hive.memory_db) == 3
    code, out, _ = cli(hive, "import", str(chat_log(tmp_path, "b.jsonl", 1, 5)), "--project", "p30")
    assert code == 0 and "imported 5 memories from" in out  # p26's D1:* stay p26's
    assert schema_of(hive.memory_db) == SCHEMA_VERSION
    with LongTermMemory(hive) as ltm:
        for old in rows:
            [now] = ltm.backend.get_many([old.id], scope=old.scope)
            assert now.model_dump(exclude={"created_at", "last_accessed"}) == old.model_dump(
                exclude={"created_at", "last_accessed"}
            )
        assert ltm.backend.count() == len(rows) + 5
        found = ltm.recall("turn logged", agent="a", project="p26", k=20,
                           record_access=False)  # fmt: skip
    assert sorted(m.id for m in found) == ["D1:1", "D1:2", "D1:3", "D1:4", "D1:5", "g1"]
    assert all(m.record.project in ("p26", None) for m in found)
