"""`hivemind task list`: the board at a glance, read only."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.hive.tasks.board import TaskBoard
from tests.helpers import run_until_idle, write_agent, write_task


def listed(hive: Hive, *args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(app, ["task", "list", "--hive", str(hive.root), "--json", *args])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.output)
    return rows


def test_by_default_the_work_in_flight_is_listed(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "finished")
    run_until_idle(hive)
    write_task(hive, "waiting", front="priority: high\nassignee: worker\n")
    board = TaskBoard(hive, settle_time=0)
    write_task(hive, "held")
    [held] = [r for r in board.scan_pending() if r.id == "held"]
    board.claim(held, "worker")

    rows = listed(hive)

    assert [(r["state"], r["id"]) for r in rows] == [("pending", "waiting"), ("active", "held")]
    waiting, active = rows
    assert (waiting["priority"], waiting["assignee"], waiting["agent"]) == ("high", "worker", None)
    assert active["agent"] == "worker" and active["path"] == "tasks/active/worker/held.md"
    done = listed(hive, "--state", "done")
    assert [(r["id"], r["agent"]) for r in done] == [("finished", "worker")]


def test_unreadable_and_rejected_files_are_shown_with_their_problem_and_not_moved(
    hive: Hive,
) -> None:
    bad = hive.tasks_dir / "bad.md"
    bad.write_text("---\npriority: urgent\n---\n# Bad\n")
    hive.rejected_dir.mkdir(parents=True, exist_ok=True)
    (hive.rejected_dir / "old.md").write_text("---\n")
    (hive.rejected_dir / "old.md.reason").write_text("line 1: no closing ---\n")

    rows = listed(hive, "--all")

    assert bad.exists()  # listing moves nothing
    problems = {r["id"]: (r["state"], r["problem"]) for r in rows}
    assert problems == {
        "bad": ("pending", "line 2: priority must be one of critical, high, medium, low "
                           "(got 'urgent')"),
        "old": ("rejected", "line 1: no closing ---"),
    }


def test_the_table_says_what_is_left_out_and_bad_states_are_refused(hive: Hive) -> None:
    for i in range(3):
        write_task(hive, f"t{i}")
    runner = CliRunner()
    result = runner.invoke(app, ["task", "list", "--hive", str(hive.root), "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert "… and 1 more (--limit 0 shows all)" in result.output
    assert len(listed(hive, "--limit", "2")) == 2

    result = runner.invoke(app, ["task", "list", "--hive", str(hive.root), "--state", "nope"])
    assert result.exit_code == 1
    assert "no state 'nope'; the states are pending, active, done, failed, rejected" in (
        result.output
    )

    empty = runner.invoke(app, ["task", "list", "--hive", str(hive.root), "--state", "failed"])
    assert empty.exit_code == 0 and "no failed tasks" in empty.output
