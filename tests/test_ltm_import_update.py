"""`hivemind memory import` of ids already stored: what an update keeps, and --project."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.ltm.store import LongTermMemory

runner = CliRunner()
GOAL = "space/planning"


def run(hive: Hive, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memory", *args, "--hive", str(hive.root)])
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, name: str, *lines: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def stored(hive: Hive) -> dict[str, dict[str, Any]]:
    """id → exported line of every stored memory."""
    _, out, _ = run(hive, "export")
    return {m["id"]: m for m in map(json.loads, out.splitlines())}


def learn(hive: Hive, memory_id: str) -> dict[str, Any]:
    """A task recalls the memory and succeeds: access count, last access and the goal's
    value change (TD learning); returns the memory as then exported."""
    with LongTermMemory(hive) as ltm:
        found = ltm.recall("launch pad", agent="ann", project="apollo", task_id="t1",
                           at=datetime(2025, 3, 1, tzinfo=UTC))  # fmt: skip
        assert [m.id for m in found] == [memory_id]
        ltm.end_task("t1", success=True, goal=GOAL)
    learned = stored(hive)[memory_id]
    assert learned["access_count"] == 1 and GOAL in learned["goal_values"]
    return learned


@pytest.fixture
def apollo(hive: Hive, tmp_path: Path) -> Hive:
    """A hive with one apollo memory, r1, that a task has learned from."""
    line = {"id": "r1", "content": "Apollo launch pad 39A is booked"}
    code, _, _ = run(hive, "import", str(write(tmp_path, "r1.jsonl", line)), "--project", "apollo")
    assert code == 0
    learn(hive, "r1")
    return hive


def test_reimporting_the_same_line_keeps_what_was_learned(apollo: Hive, tmp_path: Path) -> None:
    before = stored(apollo)["r1"]
    again = write(
        tmp_path, "again.jsonl", {"id": "r1", "content": "Apollo launch pad 39A is booked"}
    )
    code, out, _ = run(apollo, "import", str(again))
    assert code == 0
    assert stored(apollo)["r1"] == before
    assert before["tier"] == "project" and before["project"] == "apollo"
    assert "imported 1 memories (0 new, 0 updated, 1 unchanged)" in out


def test_an_update_by_id_changes_what_the_line_gives_and_keeps_the_rest(
    apollo: Hive, tmp_path: Path
) -> None:
    before = stored(apollo)["r1"]
    line = {"id": "r1", "content": "Apollo launch pad 39B is booked", "importance": 0.9}
    code, out, _ = run(apollo, "import", str(write(tmp_path, "new.jsonl", line)), "--json")
    assert code == 0
    report = json.loads(out)
    assert (report["new"], report["updated"], report["unchanged"]) == (0, 1, 0)
    after = stored(apollo)["r1"]
    assert after["content"] == "Apollo launch pad 39B is booked" and after["importance"] == 0.9
    kept = ("access_count", "last_accessed", "goal_values", "tier", "project", "timestamp")
    assert {k: after[k] for k in kept} == {k: before[k] for k in kept}


def test_an_update_keeps_a_project_memory_out_of_other_projects(
    apollo: Hive, tmp_path: Path
) -> None:
    run(apollo, "import", str(write(tmp_path, "a.jsonl", {"id": "r1", "content": "pad 39A"})))
    _, elsewhere, _ = run(apollo, "search", "pad", "--project", "zeus", "--json")
    assert json.loads(elsewhere) == []


def in_scopes(hive: Hive) -> dict[tuple[str, str | None, str], dict[str, Any]]:
    """(tier, project, id) → exported line of every stored memory."""
    _, out, _ = run(hive, "export")
    return {(m["tier"], m["project"], m["id"]): m for m in map(json.loads, out.splitlines())}


def test_a_line_that_names_another_tier_leaves_the_memory_where_it_is(
    apollo: Hive, tmp_path: Path
) -> None:
    line = {"id": "r1", "content": "Apollo launch pad 39A is booked", "tier": "global"}
    _, out, _ = run(apollo, "import", str(write(tmp_path, "g.jsonl", line)))
    assert "imported 1 memories from" in out  # a new memory: its scope is its identity
    after = in_scopes(apollo)
    assert after[("global", None, "r1")]["access_count"] == 0
    assert after[("project", "apollo", "r1")]["access_count"] == 1


def test_a_line_that_gives_learned_values_sets_them(apollo: Hive, tmp_path: Path) -> None:
    line = {"id": "r1", "content": "Apollo launch pad 39A is booked", "access_count": 0,
            "goal_values": {}}  # fmt: skip
    run(apollo, "import", str(write(tmp_path, "reset.jsonl", line)))
    after = stored(apollo)["r1"]
    assert after["access_count"] == 0 and after["goal_values"] == {}


def test_an_update_does_not_activate_a_proposed_preference(hive: Hive, tmp_path: Path) -> None:
    with LongTermMemory(hive) as ltm:  # an agent's proposal
        memory_id = ltm.remember("Always write dates in ISO 8601", agent="ann", scope="global",
                                 preference=True).id
    line = {"id": memory_id, "content": "Always write dates in ISO 8601, with a Z"}
    run(hive, "import", str(write(tmp_path, "p.jsonl", line)))
    assert stored(hive)[memory_id]["status"] == "proposed"


def test_project_option_overrides_the_project_of_every_line(hive: Hive, tmp_path: Path) -> None:
    lines = (
        {"id": "a", "content": "from an export", "tier": "project", "project": "apollo"},
        {"id": "b", "content": "named its project", "project": "apollo"},
        {"id": "c", "content": "was global", "tier": "global"},
        {"id": "d", "content": "said nothing"},
    )
    code, _, _ = run(hive, "import", str(write(tmp_path, "x.jsonl", *lines)), "--project", "zeus")
    assert code == 0
    owners = {i: (m["tier"], m["project"]) for i, m in stored(hive).items()}
    assert owners == dict.fromkeys("abcd", ("project", "zeus"))


def test_project_option_copies_an_exported_memory_and_leaves_its_project_alone(
    apollo: Hive, tmp_path: Path
) -> None:
    _, exported, _ = run(apollo, "export")
    path = tmp_path / "export.jsonl"
    path.write_text(exported)
    code, out, _ = run(apollo, "import", str(path), "--project", "zeus")
    assert code == 0 and "imported 1 memories from" in out
    after = in_scopes(apollo)
    assert after[("project", "zeus", "r1")]["access_count"] == 1  # what the line carried
    assert after[("project", "apollo", "r1")] == json.loads(exported)


def test_import_help_says_project_overrides_the_lines() -> None:
    result = runner.invoke(app, ["memory", "import", "--help"], terminal_width=200)
    assert "overriding the project a line gives" in result.stdout
