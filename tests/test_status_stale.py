"""`hivemind status` never calls a hive stopped while a daemon holds its lock: one that
cannot write status.json (a full disk) is running, with a stale status file."""

from __future__ import annotations

import json
import os

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.cli.hive_status import hive_status
from hivemind.daemon.lock import HiveLock
from hivemind.hive.layout import Hive


def test_status_says_running_with_a_stale_file_while_the_lock_is_held(hive: Hive) -> None:
    hive.status_file.parent.mkdir(parents=True, exist_ok=True)
    hive.status_file.write_text(json.dumps(  # what a run before this one left
        {"pid": 1, "running": False, "stopped_because": "idle", "agents": {}}))
    with HiveLock(hive):  # this daemon could not write its own
        daemon = hive_status(hive).daemon
        result = CliRunner().invoke(app, ["status", str(hive.root)], env={"COLUMNS": "400"})
    assert daemon["running"] is True and daemon["stale"] is True
    assert daemon["pid"] == os.getpid() and "stopped_because" not in daemon
    [line] = [x for x in result.output.splitlines() if x.startswith("daemon ")]
    assert line.startswith(f"daemon running (pid {os.getpid()}), but its status file is stale")
    assert hive_status(hive).daemon["running"] is False  # the lock let go: stopped (idle)


def test_status_says_running_while_the_lock_is_held_and_no_status_file_was_written(
    hive: Hive,
) -> None:
    with HiveLock(hive):
        daemon = hive_status(hive).daemon
    assert daemon == {"running": True, "pid": os.getpid(), "stale": True}
    assert hive_status(hive).daemon is None
