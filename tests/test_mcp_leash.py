"""The leash finds what a server started even below a server that is a zombie: a
killed server is one until it is reaped, and what it started is not always handed to
the leash at once (here: the server's main thread has ended, another still runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hivemind.mcp import leash
from tests.mcp_helpers import alive

# The main thread ends (pthread_exit) while another thread still runs: the process is
# a zombie to /proc, and its child keeps it as its parent.
SERVER = """
import ctypes, subprocess, threading, time
child = subprocess.Popen(["sleep", "600"], start_new_session=True)
print(child.pid, flush=True)
threading.Thread(target=time.sleep, args=(600,)).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_what_a_zombie_server_started_is_found_and_runs() -> None:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE,
                              text=True)
    assert server.stdout is not None
    child = int(server.stdout.readline())
    try:
        deadline = time.monotonic() + 30
        while state(server.pid) != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        found = dict(leash._descendants(os.getpid()))
        assert found.get(server.pid) is False  # a zombie: nothing to kill
        assert found.get(child) is True  # found through it, and still running
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
        server.kill()  # its thread still runs
        server.wait()
