"""Is a changed file ready to read: still, and whole? (DESIGN §3: half-written files are
not read.) `Settler` answers it for the paths OS events name, on the event loop.

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
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from hivemind.fs.statcache import Sig, lstat_sig

logger = logging.getLogger(__name__)

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


K = TypeVar("K")


class Settler(Generic[K]):
    """Changed paths in, settled ones out, on the event loop.

    A path is handed on once it has been still for `settle_time`: no change reported
    for that long and an mtime at least that old (or, with a skewed clock, an
    unchanged stat). One that `sort` wants whole first is held, besides, until its
    writer is done with it (`whole_in`). One timer serves every path. `sort` says
    what a path is (None: nothing to hand on) and whether it is read whole first;
    `hand_on(path, sig, what, again)` gets it once settled (`again`: it was held).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        sort: Callable[[Path], tuple[K, bool] | None],
        hand_on: Callable[[Path, Sig | None, K, bool], None],
        settle_time: float,
        poll: bool = False,
        where: object = "",
    ) -> None:
        self.settle_time = settle_time
        self.poll = poll  # stats in a worker thread (a network filesystem)
        self.running = True
        self._loop = loop
        self._sort = sort
        self._hand_on = hand_on
        self._where = where  # named in the log
        # Paths waiting to settle: monotonic time of their last change, and the stat
        # seen at their last check (None before the first).
        self._last_raw: dict[Path, float] = {}
        self._seen_sig: dict[Path, Sig | None] = {}
        # Files still being written: what OS events said of each one's writer (only
        # where close events come: Linux inotify), and the monotonic time before which
        # a held one is not looked at again.
        self._close_events = not poll and sys.platform.startswith("linux")
        self._closed: dict[Path, bool] = {}
        self._hold: dict[Path, float] = {}
        self._held: set[Path] = set()  # held once: handed on when whole, even unchanged
        self._fallback = fallback_for(settle_time)
        self._timer: asyncio.TimerHandle | None = None
        self._checking: asyncio.Task[None] | None = None

    def __contains__(self, path: object) -> bool:
        """True while `path` waits to settle."""
        return path in self._last_raw

    def changed(self, path: Path, closed: bool | None = None) -> None:
        """`path` changed; `closed`: what the event said of its writer (see
        `osevents.closed_by`; None: nothing, as for a change a rescan found)."""
        if not self.running:
            return
        if path not in self._last_raw:
            self._seen_sig[path] = None
        self._last_raw[path] = time.monotonic()
        self._hold.pop(path, None)
        if closed is None or not self._close_events:
            self._closed.pop(path, None)
        else:
            self._closed[path] = closed
        self._arm(self.settle_time)

    async def close(self) -> None:
        """Stop: the timer and a check under way are cancelled, and nothing waits."""
        self.running = False
        if self._timer is not None:
            self._timer.cancel()
        if self._checking is not None:
            self._checking.cancel()
            await asyncio.gather(self._checking, return_exceptions=True)
        self._last_raw.clear()
        self._seen_sig.clear()
        self._hold.clear()

    def _arm(self, delay: float) -> None:
        """Make sure the settle check runs within `delay` seconds."""
        if self._checking is not None:
            return  # a check is running; it re-arms for what is left
        when = self._loop.time() + max(0.0, delay)
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._start_check)

    def _start_check(self) -> None:
        self._timer = None
        if self.running and self._checking is None:
            self._checking = asyncio.create_task(self._check_settled(), name="hive-settle")

    async def _check_settled(self) -> None:
        """Hand on every path that has been still for settle_time. On a local disk the
        stats are taken right here (microseconds each); with polling (a network
        filesystem) in a worker thread, one trip per batch."""
        try:
            now = time.monotonic()
            hold = self._hold
            due = [
                p for p, at in self._last_raw.items()
                if now - at >= self.settle_time and (not hold or hold.get(p, 0.0) <= now)
            ]
            if due:
                sigs = (
                    await asyncio.to_thread(lambda: [lstat_sig(p) for p in due])
                    if self.poll
                    else [lstat_sig(p) for p in due]
                )
                wall = time.time()
                for path, sig in zip(due, sigs, strict=True):
                    self._settle_one(path, sig, wall)
        except Exception:
            # One bad path must not silence the watcher; the next rescan retries it.
            logger.exception("%s: could not check changed files", self._where)
        finally:
            self._checking = None
            if self._last_raw and self.running:
                hold, settle = self._hold, self.settle_time
                soonest = min(
                    max(at + settle, hold.get(p, 0.0)) if hold else at + settle
                    for p, at in self._last_raw.items()
                )
                self._arm(soonest - time.monotonic())

    def _settle_one(self, path: Path, sig: Sig | None, wall: float) -> None:
        if path not in self._last_raw:
            return
        if sig is not None:
            age = wall - sig[2] / 1e9
            before = self._seen_sig.get(path)
            if age < self.settle_time and sig != before:
                # Written within settle_time but no event said so (polling, rescan, NFS).
                self._seen_sig[path] = sig
                self._last_raw[path] = time.monotonic() - max(age, 0.0)
                return
        sorted_ = self._sort(path)
        if sig is not None and sorted_ is not None and sorted_[1]:
            wait = self._writer_wait(path, sig, wall)
            if wait > 0:  # still being written: looked at again at its next event, or then
                self._seen_sig[path] = sig
                self._hold[path] = time.monotonic() + wait
                self._held.add(path)
                return
        del self._last_raw[path]
        self._seen_sig.pop(path, None)
        self._hold.pop(path, None)
        self._closed.pop(path, None)
        held = path in self._held
        self._held.discard(path)
        try:
            if sorted_ is not None:
                self._hand_on(path, sig, sorted_[0], held)
        except Exception:
            logger.exception("%s: could not hand the change on", path)

    def _writer_wait(self, path: Path, sig: Sig, wall: float) -> float:
        """Seconds before the file at `path` may be whole (0.0: it is): its writer
        closed it, by the kernel's word or an event's, else it has been still for the
        fallback time (by its mtime, or since its last event)."""
        still_for = max(wall - sig[2] / 1e9, time.monotonic() - self._last_raw[path])
        return whole_in(path, still_for, self._closed.get(path), self._fallback)
