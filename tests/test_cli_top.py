"""`hivemind top` through textual's headless harness, against real temporary hives."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta

import pytest
from rich.text import Text
from textual.widgets import DataTable, RichLog, Static

from hivemind.cli.top.app import TopApp
from hivemind.cli.top.snapshot import HiveReader
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.steering import pause_path, paused_agents
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.offline import OfflineProvider
from tests.helpers import fast_config, run_until_idle, until, write_agent, write_task

SIZE = (180, 50)


def table_rows(app: TopApp, which: str) -> list[list[str]]:
    """The rows a table shows, as plain text."""
    table: DataTable[Text | str] = app.query_one(which, DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


def agent_row(app: TopApp, name: str) -> list[str]:
    return next(row for row in table_rows(app, "#agents") if row[0] == name)


def header(app: TopApp) -> str:
    return str(app.query_one("#daemon", Static).content)


def feed(app: TopApp) -> str:
    return "\n".join(strip.text for strip in app.query_one("#feed", RichLog).lines)


def failed_task(hive: Hive, stem: str) -> None:
    write_task(hive, stem, front="max_attempts: 1\n")
    board = TaskBoard(hive, settle_time=0)
    [ref] = [r for r in board.scan_pending() if r.id == stem]
    held = board.claim(ref, "worker")
    assert held is not None
    board.fail(held, "the tool kept failing", "worker")


async def test_without_a_daemon_top_says_so_and_shows_the_agents_stopped(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    PostOffice(hive).send(HUMAN, "worker", "hello", "Are you there?")

    async with TopApp(hive).run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "no daemon" in header(pilot.app)
        assert "pending 1" in header(pilot.app)
        assert agent_row(pilot.app, "worker")[1] == "stopped"
        assert agent_row(pilot.app, "worker")[3] == "1"  # unread mail
        assert table_rows(pilot.app, "#tasks")[0][:4] == ["pending", "t1", "t1", ""]


async def test_top_follows_a_running_daemon_to_the_end_of_its_tasks(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Write a haiku about folders.")
    write_task(hive, "t2", "Write another.")
    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions())
    running = asyncio.ensure_future(daemon.run())
    try:
        app = TopApp(hive, refresh=0.1)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()  # mounted
            await until(lambda: "daemon running" in header(app), "top sees the daemon")
            await until(lambda: "done 2" in header(app), "top counts both tasks done")
            await until(lambda: "done t2" in feed(app), "the feed shows t2 done")
            row = agent_row(app, "worker")
            assert row[1] == "idle"
            assert row[6].startswith("[offline provider]")  # the last line it wrote
            assert int(row[4].replace(",", "")) > 0  # tokens today
            assert "works on t1" in feed(app)
            await pilot.press("c")
            await pilot.pause()
            shown = "\n".join(s.text for s in pilot.app.screen.query_one(RichLog).lines)
            assert "complete_task(task_id=t1" in shown
            await pilot.pause(0.35)  # refreshes go on beneath the conversation
            await pilot.press("escape")
            await pilot.pause()
            assert "done 2" in header(app)
    finally:
        daemon.stop("signal")
        await running


async def test_the_pause_key_pauses_the_selected_agent_and_shows_it(hive: Hive) -> None:
    write_agent(hive, "worker")

    async with TopApp(hive).run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        assert set(paused_agents(hive)) == {"worker"}
        assert agent_row(pilot.app, "worker")[1].startswith("paused (by human")
        assert "worker paused by human" in feed(pilot.app)
        await pilot.press("p")
        await pilot.pause()
        assert paused_agents(hive) == {}
        assert agent_row(pilot.app, "worker")[1] == "stopped"
        assert "worker resumed" in feed(pilot.app)


async def test_the_retry_key_moves_the_selected_failed_task_back(hive: Hive) -> None:
    write_agent(hive, "worker")
    failed_task(hive, "t1")

    async with TopApp(hive).run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert table_rows(pilot.app, "#tasks")[0][:3] == ["failed", "t1",
                                                          "the tool kept failing"]
        await pilot.press("tab", "r")
        await pilot.pause()
        assert (hive.tasks_dir / "t1.md").exists()
        assert not (hive.failed_dir / "t1.md").exists()
        assert table_rows(pilot.app, "#tasks")[0][:2] == ["pending", "t1"]
        assert "retried t1" in feed(pilot.app)


async def test_the_retry_key_on_a_task_not_failed_moves_nothing(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")

    async with TopApp(hive).run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("tab", "r")
        await pilot.pause()
        assert (hive.tasks_dir / "t1.md").exists()
        assert table_rows(pilot.app, "#tasks")[0][:2] == ["pending", "t1"]


def test_a_snapshot_reads_only_what_was_appended_since_the_last(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    run_until_idle(hive)
    reader = HiveReader(hive)
    first = reader.snapshot()
    assert [e.text for e in first.feed if e.kind == "done"] == ["done t1"]

    with hive.audit_path("worker").open("a") as fh:
        fh.write(json.dumps({"event": "cycle", "at": "2099-01-01T00:00:00+00:00",
                             "tool_calls": "not a list", "text": "skipped"}) + "\n")
        fh.write(json.dumps({"event": "cycle", "at": "2099-01-01T00:00:01+00:00",
                             "effects": {"tasks_failed": ["t9"]},
                             "text": "line one\nthe last line"}) + "\n")
        fh.write("{torn")
    second = reader.snapshot()

    assert [e.text for e in second.feed if e.kind in ("done", "failed")] == [
        "done t1", "failed t9"]
    assert second.agents[0].said == "the last line"


def test_the_days_tokens_and_cost_count_every_cycle_of_a_long_log(hive: Hive) -> None:
    write_agent(hive, "worker")
    today = datetime.now(UTC)
    yesterday = (today - timedelta(days=1)).isoformat()
    lines = [{"event": "cycle", "at": yesterday, "usage": {"input_tokens": 999},
              "cost": 9.0}]
    lines += [{"event": "cycle", "at": today.isoformat(), "cycle": n,
               "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 5},
               "cost": 0.25, "tool_calls": [{"name": "recall", "input": {
                   "usage": {"input_tokens": 7}}}]} for n in range(120)]
    hive.audit_path("worker").parent.mkdir(parents=True, exist_ok=True)
    hive.audit_path("worker").write_text("".join(json.dumps(r) + "\n" for r in lines))

    [row] = HiveReader(hive).snapshot().agents

    assert row.tokens_today == 120 * 125  # yesterday's cycle and a tool's input not counted
    assert row.cost_today == 120 * 0.25


async def test_escape_sequences_in_files_and_model_text_never_reach_the_terminal(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", front="title: \"Evil \\e[2J\\e]0;pwned\\a title\"\n")
    hive.audit_path("worker").parent.mkdir(parents=True, exist_ok=True)
    hive.audit_path("worker").write_text(json.dumps({
        "event": "cycle", "at": datetime.now(UTC).isoformat(), "cycle": 1,
        "text": "ok\n\x1b[31mred\x07", "tool_calls": [{"name": "x\x1b", "input": {}}]}) + "\n")

    async with TopApp(hive).run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = [*table_rows(pilot.app, "#tasks")[0], *agent_row(pilot.app, "worker"),
                 feed(pilot.app)]
        assert not any("\x1b" in cell or "\x07" in cell for cell in shown)
        assert "Evil ?[2J?]0;pwned? title" in shown
        assert agent_row(pilot.app, "worker")[6] == "?[31mred?"


@pytest.mark.parametrize(
    ("runtime", "state", "detail"),
    [
        ({"state": "thinking"}, "thinking", ""),
        ({"state": "waiting for the model service, next try in 8 s"}, "waiting",
         "waiting for the model service, next try in 8 s"),
        ({"state": "paused (its daily token budget is spent)"}, "paused",
         "its daily token budget is spent"),
        ({"state": "error", "last_error": "OSError: disk"}, "error", "OSError: disk"),
        ({"state": "idle"}, "idle", ""),
        ("not a dict", "stopped", ""),  # status.json fails its model: state unknown
    ],
    ids=["thinking", "waiting", "paused", "error", "idle", "hostile"],
)
def test_an_agents_state_is_read_from_the_running_daemons_status(
    hive: Hive, runtime: object, state: str, detail: str
) -> None:
    write_agent(hive, "worker")
    hive.status_file.write_text(json.dumps({
        "pid": os.getpid(), "running": True, "agents": {"worker": runtime}}))

    [row] = HiveReader(hive).snapshot().agents

    assert (row.state, row.detail) == (state, detail)


def test_a_status_file_that_is_no_object_says_the_daemon_state_is_unknown(hive: Hive) -> None:
    write_agent(hive, "worker")
    hive.status_file.write_text("[1, 2]")

    snap = HiveReader(hive).snapshot()

    assert snap.daemon.text.startswith("daemon state unknown")
    assert snap.agents[0].state == "stopped"


def test_tasks_that_fail_or_are_rejected_between_snapshots_are_in_the_feed(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    reader = HiveReader(hive)
    reader.snapshot()

    failed_task(hive, "t1")  # failed by the board, with no cycle record telling of it
    (hive.rejected_dir / "bad.md").write_text("---\n")
    (hive.rejected_dir / "bad.md.reason").write_text("line 1: no closing ---\n")
    snap = reader.snapshot()

    told = [(e.agent, e.kind, e.text) for e in snap.feed]
    assert ("worker", "failed", "failed t1: the tool kept failing") in told
    assert ("board", "failed", "rejected bad: line 1: no closing ---") in told


async def test_the_pause_key_on_a_running_daemon_holds_the_agents_work(hive: Hive) -> None:
    write_agent(hive, "worker")
    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions())
    running = asyncio.ensure_future(daemon.run())
    try:
        app = TopApp(hive, refresh=0.1)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await until(lambda: "daemon running" in header(app), "top sees the daemon")
            await pilot.press("p")

            await until(lambda: agent_row(app, "worker")[1].startswith("paused (by human"),
                        "the daemon says worker is paused")
            write_task(hive, "t1", front="assignee: worker\n")
            await until(lambda: any(row[0] == "pending" and "waits:" in row[2]
                                    and "worker is paused" in row[2]
                                    for row in table_rows(app, "#tasks")),
                        "t1 shows why it waits")
            assert (hive.tasks_dir / "t1.md").exists()
            await pilot.press("p")  # resumes
            await until((hive.done_dir / "t1.md").exists, "worker does t1 once resumed")
    finally:
        daemon.stop("signal")
        await running


async def test_the_pause_key_on_an_agent_its_rom_disables_writes_no_resume(
    hive: Hive,
) -> None:
    write_agent(hive, "worker", front="enabled: false\n")

    async with TopApp(hive).run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert agent_row(pilot.app, "worker")[1] == "paused (enabled: false in its ROM)"
        await pilot.press("p")
        await pilot.pause()
        assert not pause_path(hive, "worker").exists()  # its ROM decides, not a resume
        assert agent_row(pilot.app, "worker")[1].startswith("paused")


async def test_two_failed_files_of_one_task_id_are_both_shown(hive: Hive) -> None:
    write_agent(hive, "worker")
    failed_task(hive, "t1")
    (hive.failed_dir / "t1-1.md").write_text((hive.failed_dir / "t1.md").read_text())

    async with TopApp(hive).run_test(size=SIZE) as pilot:
        await pilot.pause()
        rows = table_rows(pilot.app, "#tasks")
        assert [r[:2] for r in rows] == [["failed", "t1"], ["failed", "t1"]]
        await pilot.press("tab", "r")
        await pilot.pause()
        assert (hive.tasks_dir / "t1.md").exists()  # retried by its id
