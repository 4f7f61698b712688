"""`hivemind top` in a real terminal (tmux): it draws the hive and quits on `q`."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from hivemind.hive.layout import Hive
from tests.helpers import write_agent, write_task

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux here")


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.1)


def test_top_draws_the_hive_in_a_terminal_and_quits_on_q(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", front="title: Count the bees\n")
    session = f"hivemind-top-test-{uuid.uuid4().hex[:8]}"
    command = (f"cd {shlex.quote(str(hive.root))} && PYTHONPATH={shlex.quote(str(ROOT))} "
               f"{shlex.quote(sys.executable)} -m hivemind top; sleep 30")
    env = {**os.environ, "TERM": "xterm-256color"}
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "150", "-y", "40",
                    command], check=True, env=env)
    try:
        def screen() -> str:
            return tmux("capture-pane", "-t", session, "-p")

        wait_for(lambda: "Count the bees" in screen(), "top shows the task")
        shown = screen()
        assert "no daemon" in shown and "worker" in shown and "stopped" in shown
        tmux("send-keys", "-t", session, "q")
        # Quit: the shell goes on to `sleep`, and the dashboard is gone from the screen.
        wait_for(lambda: "Count the bees" not in screen(), "top quits on q")
    finally:
        tmux("kill-session", "-t", session)
