"""A task whose `assignee` names no agent of the hive waits in tasks/, said once on the
daemon's console and in `hivemind status`, until that agent exists or it is reassigned."""

from __future__ import annotations

import asyncio
import json
import logging
import os

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.dispatch import Dispatcher
from hivemind.hive.layout import Hive
from hivemind.hive.tasks.board import TaskBoard
from hivemind.settings import AgentConfig
from tests.helpers import CountingProvider, fast_config, until, write_agent, write_task

WAITS = ("assigned to zed, which is no agent of this hive: it waits in tasks/ until "
         "agents/zed/ROM.md exists or it is given to another agent (hivemind task reassign "
         "t1 AGENT)")


def test_the_dispatcher_holds_it_for_its_agent_and_says_so_once(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    write_task(hive, "t1", front="assignee: zed\n")
    write_task(hive, "t2", front="assignee: zed\n")
    board = TaskBoard(hive, settle_time=0)
    dispatcher = Dispatcher(board)
    ann = {"ann": AgentConfig(name="ann")}  # takes any unassigned task

    with caplog.at_level(logging.WARNING):
        first, again = dispatcher.dispatch(ann), dispatcher.dispatch(ann, changed=None)

    assert not first.claimed and not again.claimed
    assert dict(first.waiting)["t1"] == dict(again.waiting)["t1"] == WAITS
    assert dict(first.waiting)["t2"] == WAITS.replace("reassign t1", "reassign t2")
    assert (hive.tasks_dir / "t1.md").exists() and (hive.tasks_dir / "t2.md").exists()
    said = [r.getMessage() for r in caplog.records if "no agent of this hive" in r.getMessage()]
    # Once for the name, however many tasks and dispatches.
    assert said == ["tasks/t1.md and any other task assigned to zed wait in tasks/: zed is no "
                    "agent of this hive (add agents/zed/ROM.md, or `hivemind task reassign ID "
                    "AGENT`; `hivemind status` lists them)"]


def test_status_flags_it_without_a_daemon(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_task(hive, "t1", front="assignee: zed\n")
    write_task(hive, "t2", front="assignee: ann\n")
    write_task(hive, "t3")

    shown = CliRunner().invoke(app, ["status", "--hive", str(hive.root)])
    as_json = CliRunner().invoke(app, ["status", "--hive", str(hive.root), "--json"])

    assert shown.exit_code == 0, shown.output
    assert "Waiting for an agent the hive does not have" in shown.output
    assert " ".join(shown.output.split()).count("t1 is assigned to zed") == 1
    assert json.loads(as_json.output)["no_agent"] == [f"t1 is {WAITS}"]


def test_it_waits_until_its_agent_is_added_then_that_agent_does_it(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_task(hive, "t1", front="assignee: zed\n")
    daemon = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())

    async def main() -> None:
        run = asyncio.create_task(daemon.run())
        await until(lambda: dict(daemon.waiting).get("t1") == WAITS, "t1 waits for zed")
        await asyncio.sleep(0.5)  # several dispatches: ann never takes it
        assert (hive.tasks_dir / "t1.md").exists()
        write_agent(hive, "zed")
        await until((hive.done_dir / "t1.md").exists, "zed did t1")
        daemon.stop("test")
        await run

    asyncio.run(main())
    assert "agent: zed" in (hive.done_dir / "t1.md").read_text()
    assert not hive.audit_path("ann").exists()  # ann never ran a cycle for it


def test_status_never_reads_a_task_file_linked_from_outside(hive: Hive) -> None:
    outside = hive.root.parent / "elsewhere.md"
    outside.write_text("---\nassignee: zed\n---\n# Not the hive's\n")
    os.link(outside, hive.tasks_dir / "linked.md")

    as_json = CliRunner().invoke(app, ["status", "--hive", str(hive.root), "--json"])

    assert json.loads(as_json.output)["no_agent"] == []
