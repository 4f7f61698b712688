"""Files people are still writing: read only once whole (DESIGN §3); claimed tasks edited
by hand wake their agent (§6); files in tasks/ that are no tasks are named once."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hivemind.cli import hive_cmds
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.fs import inotify, settling
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.tasks import pending as taskpending
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.watcher import HiveEvent, HiveEventKind, HiveWatcher
from hivemind.settings import HiveConfig
from tests.helpers import CountingProvider, until, write_agent, write_task

Kind = HiveEventKind

linux_only = pytest.mark.skipif(
    settling.writer_open(__file__) is None, reason="only Linux tells who has a file open"
)
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id .* already exists for watch")


def backdate(path: Path, seconds: float) -> None:
    """Make the file look still for `seconds` (what stillness alone would trust)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def config(hive: Hive) -> HiveConfig:
    """The default settle time (what people get), quick rescans."""
    cfg = load_hive_config(hive)
    cfg.daemon.rescan_interval = 0.2
    cfg.daemon.grace_period = 5.0
    return cfg


# -- the task board ------------------------------------------------------------------


@linux_only
def test_a_task_file_its_writer_holds_open_is_read_only_once_closed(hive: Hive) -> None:
    board = TaskBoard(hive, settle_time=0.05)
    path = hive.tasks_dir / "deploy.md"
    with path.open("w") as writer:
        writer.write("# Deploy report\n")
        writer.flush()
        backdate(path, 60)  # still for a minute: stillness alone would read it now
        assert board.scan_pending() == []
        assert board.unsettled == 1 and board.settle_wait <= settling.WRITER_RECHECK
        writer.write("Step 2: deploy to staging only.\n")
    backdate(path, 60)
    [ref] = board.scan_pending([])
    assert "Step 2: deploy to staging only." in ref.task.body


@linux_only
def test_a_task_opened_for_writing_again_is_not_claimed_until_closed(hive: Hive) -> None:
    board = TaskBoard(hive, settle_time=0)
    path = write_task(hive, "report", "Write the report.")
    [ref] = board.scan_pending()
    with path.open("a") as writer:  # `cat >> tasks/report.md`, typing
        writer.write("Also: only the staging figures.\n")
        writer.flush()
        assert board.claim(ref, "ann") is None
        assert path.exists() and not (hive.active_dir_for("ann") / "report.md").exists()
    [again] = board.scan_pending([])
    claimed = board.claim(again, "ann")
    assert claimed is not None and "only the staging figures" in claimed.task.body


def test_where_no_one_can_tell_a_fresh_file_waits_the_fallback_time(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another system (no leases), or a file of another user: stillness decides, for
    longer than the settle time; a file the watcher saw closed is read at once."""
    monkeypatch.setattr(settling, "writer_open", lambda path: None)
    monkeypatch.setattr(taskpending, "writer_open", lambda path: None, raising=False)
    board = TaskBoard(hive, settle_time=0.05)
    fresh = write_task(hive, "fresh")
    backdate(fresh, 0.5)  # past the settle time, not the fallback time
    assert board.scan_pending() == []
    assert 0.01 < board.settle_wait <= settling.FALLBACK
    backdate(fresh, settling.FALLBACK + 0.1)
    assert [r.id for r in board.scan_pending([])] == ["fresh"]
    closed = write_task(hive, "closed")
    backdate(closed, 0.5)
    assert [r.id for r in board.scan_pending([closed])] == ["fresh", "closed"]


@linux_only
def test_a_message_written_by_hand_into_new_is_read_once_closed(hive: Hive) -> None:
    box = Mailbox(hive, "ann").ensure()
    path = box.new_dir / "twopart.md"
    with path.open("w") as writer:
        writer.write("---\nfrom: human\nsubject: two parts\n---\npart one\n")
        writer.flush()
        assert box.unread() == []
        writer.write("PART TWO: the important bit\n")
    [item] = box.unread()
    assert "PART TWO" in item.message.body


# -- the watcher -----------------------------------------------------------------------


@pytest.fixture(params=["loop-inotify", "watchdog-threads"])
def os_events(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "loop-inotify" and not inotify.available():
        pytest.skip("inotify is Linux's")
    monkeypatch.setattr(HiveWatcher, "loop_inotify", request.param == "loop-inotify")
    return str(request.param)


async def expect(watcher: HiveWatcher, timeout: float = 3.0) -> HiveEvent:
    event = await watcher.next(timeout)
    assert event is not None, "no event arrived"
    return event


@linux_only
@pytest.mark.parametrize("where", ["tasks/deploy.md", "mailboxes/ann/new/twopart.md"])
async def test_a_file_is_handed_on_once_its_writer_closes_it(
    hive: Hive, os_events: str, where: str
) -> None:
    path = hive.root / where
    path.parent.mkdir(parents=True, exist_ok=True)
    async with HiveWatcher(hive, settle_time=0.02) as w:
        with path.open("w") as writer:
            writer.write("# Deploy report\n")
            writer.flush()
            assert await w.next(0.4) is None  # still open: not news yet
            writer.write("Step 2: staging only.\n")
        event = await expect(w)
        assert event.path == path and event.kind in (Kind.TASK_DROPPED, Kind.MAIL_ARRIVED)
        assert await w.next(0.3) is None


async def test_an_edit_of_a_claimed_task_is_news_for_its_agent(
    hive: Hive, os_events: str
) -> None:
    held = hive.active_dir_for("ann") / "t1.md"
    held.parent.mkdir(parents=True)
    held.write_text("# Task one\nOriginal body.\n")
    async with HiveWatcher(hive, settle_time=0.02) as w:
        with held.open("a") as f:
            f.write("ADDED: please also do X.\n")
        assert await expect(w) == HiveEvent(Kind.TASK_EDITED, held, "ann")
        assert await w.next(0.3) is None


async def test_files_in_tasks_that_are_no_tasks_are_named_once_each(
    hive: Hive, os_events: str, caplog: pytest.LogCaptureFixture
) -> None:
    (hive.tasks_dir / "Fix-Login.MD").write_text("# upper\n")
    (hive.tasks_dir / "batch").mkdir()
    (hive.tasks_dir / "batch" / "one.md").write_text("# in a folder\n")
    for quiet in (".x.md.swp", "x.md~", "#x.md#", "y.tmp"):
        (hive.tasks_dir / quiet).write_text("editor\n")
    caplog.set_level(logging.WARNING, logger="hivemind.hive.watcher")
    async with HiveWatcher(hive, settle_time=0.02, rescan_interval=0.1) as w:
        (hive.tasks_dir / "todo.txt").write_text("# txt\n")
        await until(lambda: "todo.txt" in caplog.text, "todo.txt is named", 3.0)
        (hive.tasks_dir / "todo.txt").write_text("# txt, edited\n")
        await asyncio.sleep(0.4)  # a few rescans
        assert await w.next(0.01) is None
    lines = [r.getMessage() for r in caplog.records]
    assert sorted(lines) == [
        "tasks/Fix-Login.MD: not read as a task: only *.md files are; "
        "rename it to Fix-Login.md",
        "tasks/batch/: a folder is not read: tasks are the *.md files directly in "
        "tasks/; move them from batch/ into tasks/",
        "tasks/todo.txt: not read as a task: only *.md files are; rename it to todo.md",
    ]


# -- the daemon ------------------------------------------------------------------------


@linux_only
def test_a_task_written_in_two_parts_is_done_with_both(hive: Hive) -> None:
    write_agent(hive, "assistant")
    daemon = Daemon(hive, config(hive), CountingProvider(), RunOptions())
    done = hive.done_dir / "deploy.md"

    async def main() -> None:
        run = asyncio.create_task(daemon.run())
        await asyncio.sleep(0.3)
        writer = await asyncio.create_subprocess_exec(
            "sh", "-c",
            '{ echo "# Deploy report"; sleep 0.6; echo "Step 2: DO NOT deploy to production"; }'
            " > tasks/deploy.md",
            cwd=hive.root,
        )
        await writer.wait()
        await until(done.exists, "the task is done")
        daemon.stop("test")
        await run

    asyncio.run(main())
    assert "Step 2: DO NOT deploy to production" in done.read_text()


def test_editing_a_claimed_task_wakes_its_agent_once(hive: Hive) -> None:
    """An agent that holds its task (it cannot complete it) thinks again when a person
    adds to the task, sees the new text, and then stays idle: no loop on its own moves."""
    write_agent(hive, "slow", front="tools: [send_message, read_file, write_file, fail_task]\n"
                "accepts_unassigned: false\nheartbeat: 0\n")
    write_task(hive, "t1", "Original body.", front="assignee: slow\n")
    provider = CountingProvider()
    daemon = Daemon(hive, config(hive), provider, RunOptions())
    held = hive.active_dir_for("slow") / "t1.md"

    async def cycles_settle() -> int:
        seen = -1
        for _ in range(40):  # until no cycle came for 0.3 s
            await asyncio.sleep(0.3)
            if daemon.totals.cycles == seen:
                break
            seen = daemon.totals.cycles
        return seen

    async def main() -> tuple[int, int, int]:
        run = asyncio.create_task(daemon.run())
        await until(held.exists, "the task is claimed")
        claimed = await cycles_settle()
        with held.open("a") as f:
            f.write("ADDED LINE: please also do X.\n")
        edited = await cycles_settle()
        await asyncio.sleep(0.5)
        daemon.stop("test")
        await run
        return claimed, edited, daemon.totals.cycles

    claimed, edited, at_end = asyncio.run(main())
    assert claimed == 1
    assert edited == 2 and at_end == 2  # one cycle (model calls) for the edit, none after
    assert "ADDED LINE: please also do X." in provider.requests[-1].context_volatile


def test_a_non_md_task_file_is_named_on_the_console_and_in_status(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(hive, "assistant")
    (hive.tasks_dir / "plan.markdown").write_text("# markdown\n")
    caplog.set_level(logging.WARNING)
    options = RunOptions(until_idle=True, idle_settle=0.2)
    asyncio.run(asyncio.wait_for(Daemon(hive, config(hive), CountingProvider(), options).run(), 30))
    told = "tasks/plan.markdown: not read as a task: only *.md files are; rename it to plan.md"
    assert [r.getMessage() for r in caplog.records].count(told) == 1
    app = typer.Typer()
    hive_cmds.register(app)
    shown = CliRunner().invoke(app, ["status", str(hive.root), "--json"])
    assert json.loads(shown.output)["not_tasks"] == [told]
    shown = CliRunner().invoke(app, ["status", str(hive.root)], env={"COLUMNS": "200"})
    assert told in shown.output
