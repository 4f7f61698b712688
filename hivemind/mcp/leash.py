"""Start an MCP server so that it, and whatever it starts, dies with the daemon (run as
a script, stdlib only).

    python -I -S leash.py <daemon pid> <program> [args…]

The leash leads the server's process group (the SDK starts it in a session of its
own) and runs the server as its child. On Linux the kernel signals the leash when the
daemon's thread that started it ends (prctl PR_SET_PDEATHSIG), even a daemon killed
with -9; the leash then kills the whole group: the server and what it started (the
`node` under `npx`, say), which a signal to the server alone would leave behind. The
server too is killed if the leash goes. The leash says on stderr the server's pid, and
how it ended (the daemon reads both there: the server's exit code is otherwise lost).
It imports nothing but the standard library: it runs with the server's small
environment, where hivemind may not be importable.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from types import FrameType

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent thread ends
PID_MARK = "hivemind-mcp-leash pid "
"""`<mark><server pid> group <group id>`: a line on stderr, before the server's own."""
EXIT_MARK = "hivemind-mcp-leash exit "
"""`<mark><code>` (negative: killed by that signal): the leash's last line on stderr."""
NOT_FOUND = 127  # the shell's exit code for a command it cannot run
_GONE = signal.SIGUSR1  # what the kernel sends the leash when the daemon is gone


def command(daemon_pid: int, program: str, args: list[str]) -> list[str]:
    """The argv that starts `program args…` on this leash."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(daemon_pid),
            program, *args]


def _signal_when_parent_ends(signum: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)


def _end_group(signum: int, frame: FrameType | None) -> None:
    """The daemon is gone: the server's whole process group goes too (this leash too)."""
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _say(line: str) -> None:
    # One write, under PIPE_BUF, after a newline: whole and at a line's start, whatever
    # the server wrote last.
    with contextlib.suppress(OSError):
        os.write(2, f"\n{line}\n".encode())


def _serve(leash: int, program: str, args: list[str]) -> None:
    """In the child: die with the leash, then become the server."""
    signal.signal(_GONE, signal.SIG_DFL)
    _signal_when_parent_ends(signal.SIGKILL)
    if os.getppid() != leash:
        os._exit(1)
    try:
        os.execvp(program, [program, *args])
    except OSError as e:
        with contextlib.suppress(OSError):
            os.write(2, f"cannot run {program}: {e.strerror}\n".encode())
    os._exit(NOT_FOUND)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit():
        sys.stderr.write("usage: leash.py <daemon pid> <program> [args…]\n")
        return 2
    signal.signal(_GONE, _end_group)
    _signal_when_parent_ends(_GONE)
    if os.getppid() != int(argv[0]):
        return 1  # the daemon died before the prctl: no signal would come
    leash = os.getpid()
    server = os.fork()
    if server == 0:
        _serve(leash, argv[1], argv[2:])
    # The server reads stdin and writes stdout: the leash keeps no end of them, so the
    # daemon sees the server's stdout close when the server exits.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    # The SDK's shutdown signals the whole group: that is for the server to act on; the
    # leash stays until the server is gone, to say how it ended.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _say(f"{PID_MARK}{server} group {os.getpgrp()}")
    _, status = os.waitpid(server, 0)
    code = os.waitstatus_to_exitcode(status)
    _say(f"{EXIT_MARK}{code}")
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
