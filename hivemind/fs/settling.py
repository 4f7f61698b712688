"""Is a file someone is writing whole yet? (DESIGN §3: half-written files are not read.)

`( echo "# Title"; slow_cmd; echo "Step 2" ) > tasks/x.md` writes, pauses, writes again:
stillness alone cannot tell that pause from the end. What can, best first:

- the kernel: on Linux a read lease cannot be taken on a file that a process has open
  for writing (`writer_open`). It sees writers that opened the file before the daemon
  started, and the writer of a file renamed since;
- the watcher's events: a close-write after the last write (`HiveWatcher`);
- time, where neither can tell (another system, polling, a file of another user on a
  filesystem without leases): the file must have been still for `FALLBACK` seconds.

A file written whole and closed at once (`write_text`, an atomic rename, a maildir
link) is whole at the first look: the fast path costs an open, three fcntl calls (set
the lease's signal, take the lease, drop it) and a close.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import sys
import time
from pathlib import Path

FALLBACK = 2.0
"""Seconds a file must have been still when nothing can tell whether its writer is done."""
WRITER_RECHECK = 0.5
"""Seconds between looks at a file a writer holds open (its close event usually comes
first)."""


def fallback_for(settle_time: float) -> float:
    """The stillness asked of a file nothing can vouch for: none with `settle_time` 0
    (files are trusted as they are), else at least `FALLBACK`."""
    return max(FALLBACK, settle_time) if settle_time > 0 else 0.0


if sys.platform == "linux":
    import fcntl
    import signal

    def writer_open(path: Path | str) -> bool | None:
        """True if a process has `path` open for writing, False if none has, None if
        this system cannot tell (no leases, a file of another user, a FIFO, gone)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            # A writer opening the file in the instant the lease is held makes the kernel
            # signal its holder: SIGURG (ignored unless handled), not SIGIO, which ends
            # a process that has no handler for it.
            fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        except OSError as exc:
            return True if exc.errno == errno.EAGAIN else None
        else:
            with contextlib.suppress(OSError):  # the close below drops it anyway
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
            return False
        finally:
            os.close(fd)

else:

    def writer_open(path: Path | str) -> bool | None:
        """None: only Linux can tell whether a process has a file open for writing."""
        return None


def whole_in(path: Path | str, still_for: float, closed: bool | None, fallback: float) -> float:
    """Seconds to wait before `path` may be whole (0.0: it is whole now).

    `still_for`: seconds it has been unchanged; `closed`: what OS events said (True:
    closed after its last write, or put in place whole; False: written and not closed
    since; None: nothing); `fallback`: the stillness asked when nothing else can tell.
    """
    writing = writer_open(path)
    if writing is not None:
        return WRITER_RECHECK if writing else 0.0
    if closed:
        return 0.0
    return max(0.0, fallback - still_for)


async def until_whole(path: Path, fallback: float, limit: float) -> bool:
    """Wait until `path` may be whole (see `whole_in`; its mtime tells its stillness);
    False if it is still being written after `limit` seconds. A file gone is whole."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            return True  # gone or unreadable: the caller says what became of it
        wait = whole_in(path, time.time() - mtime, None, fallback)
        if wait <= 0:
            return True
        if loop.time() + wait > deadline:
            return False
        await asyncio.sleep(wait)
