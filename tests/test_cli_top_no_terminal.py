"""`hivemind top` where there is no terminal (a pipe, a script, CI): one line, no hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hivemind.hive.layout import Hive
from tests.helpers import write_agent

ROOT = Path(__file__).resolve().parent.parent


def test_top_without_a_terminal_says_what_to_use_instead_and_exits(hive: Hive) -> None:
    write_agent(hive, "worker")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # Before, the dashboard drew into the pipe until killed: the timeout is that failure.
    done = subprocess.run(
        [sys.executable, "-m", "hivemind", "top", "--hive", str(hive.root)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "needs a terminal" in done.stderr
    assert "hivemind status" in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2  # one line (soft-wrapped at most)
