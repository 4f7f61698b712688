"""A full disk pauses the hive's writers and the hive goes on by itself once space is
back; nothing is told before it is on disk, and nothing spent goes uncounted.

The disk "fills up" through the seam every durable write goes through
(`hivemind.fs.diskspace.write`), swapped here for one that refuses some paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hivemind.agent.services import HiveServices
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.errors import DiskFullError
from hivemind.fs import diskspace
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.llm.base import ToolCall
from hivemind.llm.offline import OfflineProvider
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools.base import ToolContext
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import fast_config, run_until_idle, until, write_agent, write_task
from tests.scripted_model import task_completer


class FakeDisk:
    """The seam's stand-in: while `full`, writes of the paths `refuses` names fail."""

    def __init__(self, refuses: Callable[[Path], bool]) -> None:
        self.full = False
        self.refuses = refuses
        self.refused: list[Path] = []

    def write(self, fd: int, data: bytes | memoryview, path: Path) -> int:
        if self.full and self.refuses(Path(path)):
            self.refused.append(Path(path))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
        return os.write(fd, data)


def audit(hive: Hive, agent: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in hive.audit_path(agent).read_text().splitlines() if x]


def notices(hive: Hive) -> list[str]:
    return [m.message.subject for m in Mailbox(hive, "human").unread()]


def test_a_full_disk_pauses_the_hive_and_it_resumes_once_space_is_back(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nearly full: a notice and an audit line still fit, a task file does not.
    disk = FakeDisk(lambda p: "tasks" in p.parts or p.name.startswith(".space-probe"))
    monkeypatch.setattr(diskspace, "write", disk.write)
    write_agent(hive, "worker")
    write_agent(hive, "other")
    write_task(hive, "t1", front="assignee: worker\nreply_to: human\n")
    disk.full = True

    with FakeAnthropic() as api:
        api.responder = task_completer
        daemon = Daemon(hive, fast_config(hive), scripted_model.provider(api),
                        RunOptions(backoff=0.05))

        async def main() -> None:
            run = asyncio.create_task(daemon.run())
            await until(lambda: daemon.disk.full, "the daemon sees the disk is full")
            calls = len(api.message_requests)
            write_task(hive, "t2", front="assignee: other\n")  # arrives while full
            await asyncio.sleep(0.6)
            # Paused: no model call while nothing can be written, and it says why.
            assert len(api.message_requests) == calls
            assert "the disk is full" in daemon.waiting[0][1]
            await until(lambda: "writing in tasks/active/worker/" in str(
                json.loads(hive.status_file.read_text())["disk_full"]), "status.json says so")
            # No [done] notice for a task still held.
            assert (hive.active_dir_for("worker") / "t1.md").exists()
            assert notices(hive) == []
            disk.full = False  # space freed: nobody restarts anything
            await until(lambda: (hive.done_dir / "t1.md").exists()
                        and (hive.done_dir / "t2.md").exists(), "both tasks are done",
                        timeout=10)
            await until(lambda: daemon.disk.problem is None, "the pause is lifted")
            daemon.stop("test")
            await run

        asyncio.run(main())

    assert notices(hive) == ["[done] t1"]
    [crashed, *_] = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert "No space left on device" in crashed["error"]  # the record says what happened
    # The crashed cycle's tokens count in the run's figures (3 calls of 10 input tokens).
    assert daemon.totals.usage.input_tokens == 10 * len(api.message_requests)


def test_a_restart_on_a_full_disk_starts_says_why_and_recovers_later(
    hive: Hive, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    disk = FakeDisk(lambda p: True)  # full: not one byte more
    monkeypatch.setattr(diskspace, "write", disk.write)
    write_agent(hive, "worker")
    write_task(hive, "t1")
    # A cycle a kill cut short: the start marks it interrupted, which needs a write.
    hive.audit_path("worker").parent.mkdir(parents=True, exist_ok=True)
    hive.audit_path("worker").write_text(json.dumps(
        {"event": "cycle_start", "at": "2026-01-01T00:00:00+00:00", "cycle": 7,
         "tasks": [], "mail": []}) + "\n")
    disk.full = True

    with FakeAnthropic() as api:
        api.responder = task_completer
        daemon = Daemon(hive, fast_config(hive), scripted_model.provider(api),
                        RunOptions(backoff=0.05))

        async def main() -> None:
            run = asyncio.create_task(daemon.run())
            await until(lambda: daemon.disk.full, "the daemon says the disk is full")
            await asyncio.sleep(0.3)
            assert not run.done()  # it started, and waits
            assert api.message_requests == []
            disk.full = False
            await until((hive.done_dir / "t1.md").exists, "t1 is done", timeout=10)
            daemon.stop("test")
            await run

        asyncio.run(main())

    assert "the disk is full (writing in .hivemind/audit/" in caplog.text
    assert "daemon.lock: the pid cannot be written" in caplog.text  # locked all the same
    records = audit(hive, "worker")
    assert [r["cycle"] for r in records if r["event"] == "interrupted"] == [7]
    assert [r["cycle"] for r in records if r["event"] == "cycle"] == [8]  # numbered on


def test_a_cycle_whose_record_cannot_be_written_still_counts_its_tokens(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FakeDisk(lambda p: True)
    monkeypatch.setattr(diskspace, "write", disk.write)
    write_agent(hive, "worker")
    write_task(hive, "t1")

    def fills_the_disk(body: Any) -> Any:
        disk.full = disk.full or not api.message_requests[1:]  # during the first call
        return task_completer(body)

    with FakeAnthropic() as api:
        api.responder = fills_the_disk
        daemon = Daemon(hive, fast_config(hive), scripted_model.provider(api),
                        RunOptions(backoff=0.05))

        async def main() -> None:
            run = asyncio.create_task(daemon.run())
            await until(lambda: daemon.disk.full, "the daemon sees the disk is full")
            await until(lambda: daemon.totals.cycles == 1, "the failed cycle is counted")
            assert daemon.totals.usage.input_tokens == 10  # its one call, unrecorded
            assert daemon.totals.errors == 1
            disk.full = False
            await until((hive.done_dir / "t1.md").exists, "t1 is done", timeout=10)
            daemon.stop("test")
            await run

        asyncio.run(main())

    assert daemon.totals.usage.input_tokens == 10 * len(api.message_requests)


def test_a_restart_on_a_really_full_disk_starts_and_catches_up(small_disk: Path) -> None:
    hive = Hive(small_disk / "hive").ensure()
    write_agent(hive, "worker")
    write_task(hive, "t1")
    run_until_idle(hive)  # the memory store, the audit log: made while there is space
    write_task(hive, "t2")
    filler = small_disk / "filler"
    with filler.open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions(backoff=0.05))

    async def main() -> None:
        run = asyncio.create_task(daemon.run())
        await until(lambda: daemon.disk.full, "the daemon says the disk is full")
        await asyncio.sleep(0.3)
        assert not run.done() and not (hive.done_dir / "t2.md").exists()
        filler.unlink()
        await until((hive.done_dir / "t2.md").exists, "t2 is done", timeout=10)
        daemon.stop("test")
        await run

    asyncio.run(main())
    assert daemon.disk.problem is None and daemon.services.ltm is not None


def test_a_memory_store_with_no_space_pauses_like_any_full_disk(small_disk: Path) -> None:
    hive = Hive(small_disk / "hive").ensure()
    services = HiveServices.open(hive, OfflineProvider())
    config = services.config
    services.ltm = LongTermMemory(hive, config.memory, config.agents.retrieval)
    ctx = ToolContext(hive=hive, agent="ann", config=AgentConfig(name="ann"),
                      board=services.board, post=services.post,
                      working=WorkingMemoryManager(), active_tasks={}, ltm=services.ltm)
    call = ToolCall(id="t1", name="remember", input={"content": "x" * 4000, "scope": "global"})
    filler = small_disk / "filler"
    with filler.open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)

    async def remember_until_full() -> None:
        for _ in range(200):  # the store's own free pages go first
            await services.tools.execute(ctx, call)

    try:
        with pytest.raises(DiskFullError, match="database or disk is full"):
            asyncio.run(remember_until_full())
    finally:
        services.ltm.close()
