"""`--until-idle` on a disk that stays full gives up like on a model outage (exit 3,
one line naming the disk), and goes on if space comes back before.

The disk "fills up" through the seam every durable write goes through
(`hivemind.fs.diskspace.write`), or for real on a small tmpfs where one can be mounted.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.outcome import EXIT_WORK_LEFT
from hivemind.fs import diskspace
from hivemind.hive.layout import Hive
from hivemind.llm.offline import OfflineProvider
from tests.helpers import fast_config, run_until_idle, until, write_agent, write_task

REPO = Path(__file__).resolve().parent.parent


class FullDisk:
    """The seam's stand-in: while `full`, no write fits."""

    def __init__(self) -> None:
        self.full = True

    def write(self, fd: int, data: bytes | memoryview, path: Path) -> int:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
        return os.write(fd, data)


def give_up_after(hive: Hive, seconds: float) -> None:
    with hive.config_file.open("a") as f:
        f.write(f"\n[daemon]\ngive_up_after = {seconds}\n")


def test_until_idle_stops_once_the_disk_stayed_full_past_give_up_after(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    give_up_after(hive, 1.0)
    monkeypatch.setattr(diskspace, "write", FullDisk().write)
    started = time.monotonic()
    result = CliRunner().invoke(app, ["run", str(hive.root), "--until-idle", "--offline"])
    assert result.exit_code == EXIT_WORK_LEFT, result.output
    assert time.monotonic() - started >= 1.0  # it waited for space first
    assert "stopped: disk-full" in result.output
    [line] = [x for x in result.output.splitlines() if "given up waiting" in x]
    assert line.startswith("the disk is still full, given up waiting for space: ")


def test_space_freed_before_give_up_after_lets_until_idle_finish(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = FullDisk()
    monkeypatch.setattr(diskspace, "write", disk.write)
    write_agent(hive, "worker")
    write_task(hive, "t1")
    config = fast_config(hive)
    config.daemon.give_up_after = 30.0
    daemon = Daemon(hive, config, OfflineProvider(),
                    RunOptions(until_idle=True, idle_settle=0.2, backoff=0.05))

    async def main() -> str:
        run = asyncio.create_task(daemon.run())
        await until(lambda: daemon.disk.full, "the daemon sees the disk is full")
        await asyncio.sleep(0.5)
        disk.full = False
        return await asyncio.wait_for(run, 20)

    assert asyncio.run(main()) == "idle"
    assert (hive.done_dir / "t1.md").exists()


def test_until_idle_on_a_really_full_disk_exits_3_naming_it(small_disk: Path) -> None:
    hive = Hive(small_disk / "hive").ensure()
    write_agent(hive, "worker")
    run_until_idle(hive)  # the memory store, the audit log: made while there is space
    write_task(hive, "t1")
    give_up_after(hive, 1.0)
    with (small_disk / "filler").open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
    done = subprocess.run(
        [sys.executable, "-m", "hivemind", "run", str(hive.root), "--until-idle", "--offline"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"},
    )
    assert done.returncode == EXIT_WORK_LEFT, done.stdout + done.stderr
    assert "the disk is still full, given up waiting for space" in done.stdout
