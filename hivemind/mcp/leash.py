"""Start an MCP server so that it, and whatever it starts, dies with the daemon (run as
a script, stdlib only).

    python -I -S leash.py <daemon pid> <program> [args…]

The leash leads the server's process group (the SDK starts it in a session of its
own) and runs the server as its child. On Linux the kernel signals the leash when the
daemon's thread that started it ends (prctl PR_SET_PDEATHSIG), even a daemon killed
with -9; the leash then kills the whole group: the server and what it started (the
`node` under `npx`, say), which a signal to the server alone would leave behind. The
server too is killed if the leash goes. The leash is the "subreaper" of what the server
starts (prctl PR_SET_CHILD_SUBREAPER): a process that leaves the group (a daemon of its
own, `setsid`) is still the leash's descendant, and is killed with the rest when the
server ends or the daemon goes. The leash says on stderr the server's pid, and
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
import time
from types import FrameType

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent thread ends
PR_SET_CHILD_SUBREAPER = 36  # prctl(2): orphans below this process are reparented to it
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


def _become_subreaper() -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _descendants(root: int) -> list[tuple[int, bool]]:
    """Every process below `root` (from /proc; none elsewhere), and whether it runs.

    Zombies are found too, and what is below them: a killed server is one until it
    is reaped, and what it started may not yet be handed to the leash."""
    children: dict[int, list[tuple[int, bool]]] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields and fields[0] != b"X":
                children.setdefault(int(fields[1]), []).append(
                    (int(entry), fields[0] != b"Z"))
    found: list[tuple[int, bool]] = []
    todo = [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found.extend(kids)
        todo.extend(pid for pid, _ in kids)
    return found


def _kill_descendants() -> None:
    """Kill whatever the server started that is still running, whatever its group or
    session, and reap what comes back to the leash (a few rounds: one may fork)."""
    me = os.getpid()
    for _ in range(20):
        running = [pid for pid, runs in _descendants(me) if runs]
        for pid in running:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _reap()
        if not running:
            return
        time.sleep(0.01)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _end_group(signum: int, frame: FrameType | None) -> None:
    """The daemon is gone: the server and all it started go too (this leash too)."""
    # Once: a second signal (one came, seen in tests) would run this again inside the
    # first run, find nothing left below a zombie, and kill the leash too early.
    signal.signal(_GONE, signal.SIG_IGN)
    _kill_descendants()
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
    _become_subreaper()
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
    _kill_descendants()  # what it left behind, in its group or not
    _say(f"{EXIT_MARK}{code}")
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
