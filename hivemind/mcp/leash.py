"""Start an MCP server so that it dies with the daemon (run as a script, stdlib only).

    python -I -S leash.py <daemon pid> <program> [args…]

On Linux it asks the kernel to SIGKILL this process when the daemon's thread that
started it ends (prctl PR_SET_PDEATHSIG, which survives the exec), says its pid on
stderr (the pool reads it there: it is the server's pid once exec'd), then becomes the
server. A daemon killed with -9 thus takes its servers with it, as it takes its workers
(see daemon/worker_process.py). It imports nothing but the standard library: it runs
with the server's small environment, where hivemind may not be importable.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent thread ends
PID_MARK = "hivemind-mcp-leash pid "
"""The first line the leash writes on stderr, before the server's own."""
NOT_FOUND = 127  # the shell's exit code for a command it cannot run


def command(daemon_pid: int, program: str, args: list[str]) -> list[str]:
    """The argv that starts `program args…` on this leash."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(daemon_pid),
            program, *args]


def _die_with_daemon(daemon_pid: int) -> bool:
    """Ask for SIGKILL when the daemon's thread ends; False if it is already gone."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The daemon may have died between the fork and the prctl: then no signal will come.
    return os.getppid() == daemon_pid


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        sys.stderr.write("usage: leash.py <daemon pid> <program> [args…]\n")
        return 2
    if not _die_with_daemon(int(argv[0])):
        return 1
    program, args = argv[1], argv[2:]
    sys.stderr.write(f"{PID_MARK}{os.getpid()}\n")
    sys.stderr.flush()
    try:
        os.execvp(program, [program, *args])
    except OSError as e:
        sys.stderr.write(f"cannot run {program}: {e.strerror}\n")
        sys.stderr.flush()
    return NOT_FOUND


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
