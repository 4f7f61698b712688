"""Hive events for the daemon: OS events for speed, a periodic rescan for certainty.

On Linux the event loop reads inotify itself (`fs/inotify.py`); elsewhere, and
when polling, a watchdog observer thread hands raw paths to the loop. A path becomes a
`HiveEvent` once its size and mtime have been stable for `settle_time`, and only
if it differs from what was last handed on (duplicates coalesce). A task or a message
is handed on only once its writer is done with it (`fs/settling.py`): closed, by the
kernel's word or a close-write event, else still for a longer fallback time. Every
`rescan_interval` a stat snapshot of the watched files is diffed against what
was handed on, so an event the OS dropped (or a filesystem without inotify) is
caught anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from hivemind.fs import inotify, settling
from hivemind.fs.globs import glob_root
from hivemind.fs.statcache import Sig
from hivemind.hive.changes import HiveEventKind, classify, lstat_sig, not_a_task, snapshot
from hivemind.hive.layout import HUMAN, Hive, is_temp_name

__all__ = ["HiveEvent", "HiveEventKind", "HiveWatcher", "classify"]

logger = logging.getLogger(__name__)

# watchdog's inotify warns when a new folder's watch is registered twice (a benign race
# between its recursive walk and the folder's own creation event).
warnings.filterwarnings(
    "ignore", message="Callback with id .* already exists for watch", category=RuntimeWarning
)


class _StoppingNoise(logging.Filter):
    """watchdog (7.x) logs an error when an inotify event reaches an emitter that is being
    stopped; at shutdown that is expected, and a user should not see it as a failure."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


logging.getLogger("watchdog.observers.inotify").addFilter(_StoppingNoise())

# Opening or reading a file is not a change: leave those events out at the source.
_EVENT_TYPES: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]


# A task leaving tasks/ (claimed) or active/ (done, failed, given back), or a message
# leaving new/ (read) wakes nobody: the daemon made most of these itself. They only tidy
# what the watcher knows, at its next wake-up for something else (or the rescan),
# instead of waking the loop each.
_GONE_IS_NO_NEWS = frozenset(
    {HiveEventKind.TASK_DROPPED, HiveEventKind.TASK_EDITED, HiveEventKind.MAIL_ARRIVED}
)
# Files read only once their writer is done with them (see `fs/settling.py`).
_WHOLE_FIRST = frozenset(
    {HiveEventKind.TASK_DROPPED, HiveEventKind.TASK_EDITED, HiveEventKind.MAIL_ARRIVED}
)


@dataclass(frozen=True)
class HiveEvent:
    """Something in the hive changed: what, which file, and whose (mail, ROM)."""

    kind: HiveEventKind
    path: Path
    agent: str | None = None


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


class _Handler(FileSystemEventHandler):
    """Runs where the OS events are read (watchdog's thread, or the loop): filters,
    then hands paths to the loop."""

    def __init__(self, watcher: HiveWatcher) -> None:
        self.watcher = watcher
        self.prefix = str(watcher.hive.root) + os.sep

    def on_any_event(self, event: FileSystemEvent) -> None:
        dest = getattr(event, "dest_path", "")
        gone = event.event_type in ("deleted", "moved")  # the source path no longer is
        for raw, left in ((event.src_path, gone), (dest, False)):
            text = os.fsdecode(raw) if raw else ""
            if not text.startswith(self.prefix):
                continue
            rel = text[len(self.prefix) :].replace(os.sep, "/")
            if event.is_directory:
                self._directory(rel)
            elif kinds := classify(rel, self.watcher.watch_globs):
                news = not left or any(kind not in _GONE_IS_NO_NEWS for kind, _ in kinds)
                self.watcher._queue_raw(Path(text), wake=news, closed=_closed_by(event, left))
            elif not left and rel.startswith("tasks/") and rel.count("/") == 1:
                why = not_a_task(rel[6:])
                if why is not None:
                    self.watcher._threadsafe(self.watcher._tell_ignored, {rel[6:]: why})

    def _directory(self, rel: str) -> None:
        parts = rel.split("/")
        if parts[0] == "agents" and len(parts) == 2 and not is_temp_name(parts[1]):
            rom = self.watcher.hive.rom_path(parts[1])
            self.watcher._threadsafe(self.watcher._on_raw, rom)
        elif not any(is_temp_name(p) for p in parts):
            # A folder moved in or out carries files no event names: look now.
            self.watcher._threadsafe(self.watcher._kick_rescan)


def _closed_by(event: FileSystemEvent, left: bool) -> bool | None:
    """What an event says of its file's writer: True closed after its last write (or put
    in place whole: a rename, a link), False written and not closed since, None nothing."""
    if left:
        return None
    kind = event.event_type
    if kind == "modified":
        return False
    return True if kind in ("closed", "created", "moved") else None


class HiveWatcher:
    """`async with HiveWatcher(hive) as w: event = await w.next(timeout)`."""

    loop_inotify = True
    """On Linux, read inotify on the event loop (`fs/inotify.py`) rather than in
    watchdog's observer threads; False keeps watchdog's (tests run both)."""

    def __init__(
        self,
        hive: Hive,
        *,
        settle_time: float = 0.05,
        rescan_interval: float = 5.0,
        poll: bool = False,
        watch_globs: Iterable[str] = (),
        os_events: bool = True,
        poll_interval: float = 1.0,
    ) -> None:
        self.hive = hive
        self.settle_time = settle_time
        self.rescan_interval = rescan_interval
        self.poll = poll
        self.poll_interval = poll_interval
        self.os_events = os_events
        self.watch_globs: tuple[str, ...] = tuple(g.strip().lstrip("/") for g in watch_globs)
        self.events: asyncio.Queue[HiveEvent] = asyncio.Queue()
        self._state = _State.NEW
        self._loop: asyncio.AbstractEventLoop | None = None
        self._observer: Any = None
        self._handler: _Handler | None = None
        self._scheduled: set[tuple[Path, bool]] = set()
        self._rescanner: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._known: dict[Path, Sig] = {}
        self._agents: set[str] = set()
        # Paths waiting to settle: monotonic time of their last OS event, and the stat
        # seen at their last check (None before the first). One timer serves them all.
        self._last_raw: dict[Path, float] = {}
        self._seen_sig: dict[Path, Sig | None] = {}
        # Tasks and messages still being written: what OS events said of each one's
        # writer (see `_closed_by`; only where close events come: Linux inotify), and
        # the monotonic time before which a held one is not looked at again.
        self._close_events = not poll and sys.platform.startswith("linux")
        self._closed: dict[Path, bool] = {}
        self._hold: dict[Path, float] = {}
        self._held: set[Path] = set()  # held once: handed on when whole, even unchanged
        self._fallback = settling.fallback_for(settle_time)
        self._told: set[str] = set()  # names in tasks/ said not to be read as tasks
        self._timer: asyncio.TimerHandle | None = None
        self._checking: asyncio.Task[None] | None = None
        # Raw paths from the handler, handed over in batches (one loop wake-up).
        self._inbox: list[tuple[Path, bool | None]] = []
        self._inbox_lock = threading.Lock()
        self._woken = False  # a _take_inbox is on its way to the loop
        self._loop_thread: int | None = None

    # -- lifecycle -------------------------------------------------------------
    async def __aenter__(self) -> HiveWatcher:
        if self._state is not _State.NEW:
            raise RuntimeError("a HiveWatcher cannot be reopened; create a new one")
        self._state = _State.RUNNING
        self._loop = asyncio.get_running_loop()
        ignored: dict[str, str] = {}
        self._known = await asyncio.to_thread(snapshot, self.hive, self.watch_globs, ignored)
        self._tell_ignored(ignored, forget=True)
        self._agents = {p.parent.name for p in self._known if p.name == "ROM.md"}
        self._loop_thread = threading.get_ident()
        if self.os_events and self._on_loop():
            self._observer = self._start_loop_inotify()
        elif self.os_events:
            self._observer = await asyncio.to_thread(self._start_observer)
        self._rescanner = asyncio.create_task(self._rescan_loop(), name="hive-rescan")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the observer (joined) and every pending check."""
        if self._state is not _State.RUNNING:
            self._state = _State.CLOSED
            return
        self._state = _State.CLOSED
        if self._timer is not None:
            self._timer.cancel()
        tasks = [t for t in (self._rescanner, self._checking) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._last_raw.clear()
        self._seen_sig.clear()
        self._hold.clear()
        if self._observer is not None:
            observer, self._observer = self._observer, None
            observer.stop()
            if not isinstance(observer, inotify.LoopInotify):  # it has no thread
                await asyncio.shield(asyncio.to_thread(observer.join))

    def _watched_folders(self) -> list[tuple[Path, bool]]:
        """(folder, recursive): only what events are made of, so a hive that is also a
        git checkout or a build tree does not cost an inotify watch per folder."""
        hive = self.hive
        folders = [
            (hive.root, False),
            (hive.tasks_dir, False),
            (hive.active_dir, True),  # a person editing a claimed task wakes its agent
            (hive.agents_dir, True),
            (hive.mailboxes_dir, False),
            (hive.knowledge_dir, True),
        ]
        # Only each mailbox's new/: deliveries write in tmp/ and reading moves to cur/,
        # and events from those would only wake the watcher thread for nothing.
        with contextlib.suppress(OSError):
            for box in os.scandir(hive.mailboxes_dir):
                if box.name == HUMAN:
                    continue  # people's mail wakes no agent
                if box.is_dir(follow_symlinks=False) and not is_temp_name(box.name):
                    new = Path(box.path) / "new"
                    folders.append((new if new.is_dir() else Path(box.path), False))
        for pattern in self.watch_globs:
            base = hive.root / glob_root(pattern)
            folders.append((base, base != hive.root or "/" in pattern or "**" in pattern))
        # A recursive watch covers every folder below it.
        recursive = [f for f, r in folders if r]
        out: list[tuple[Path, bool]] = []
        for folder, rec in folders:
            covered = any(folder != top and folder.is_relative_to(top) for top in recursive)
            if not covered and (folder, rec) not in out and folder.is_dir():
                out.append((folder, rec))
        return out

    def _on_loop(self) -> bool:
        """True if OS events are read on the event loop (Linux inotify), not in
        watchdog's threads (other systems, and polling)."""
        return not self.poll and self.loop_inotify and inotify.available()

    def _start_loop_inotify(self) -> inotify.LoopInotify | None:
        reader = None
        try:
            reader = inotify.LoopInotify(on_lost=self._kick_rescan)
            self._handler = _Handler(self)
            self._schedule(reader)
        except OSError as exc:  # the limit on inotify instances or watches
            if reader is not None:
                reader.stop()
            self._cannot_watch(exc)
            return None
        reader.start()
        return reader

    def _cannot_watch(self, exc: OSError) -> None:
        """No OS events (a system limit, say): the rescan still sees every change."""
        logger.warning("%s: cannot watch (%s); relying on the rescan", self.hive.root, exc)

    def _start_observer(self) -> Any:
        observer = PollingObserver(timeout=self.poll_interval) if self.poll else Observer()
        self._handler = _Handler(self)
        try:
            self._schedule(observer)
            observer.start()
        except OSError as exc:  # e.g. the inotify watch limit
            self._cannot_watch(exc)
            return None
        return observer

    def _schedule(self, observer: Any) -> bool:
        """Watch the folders not watched yet (a mailbox made since, for one); True if
        there were any."""
        added = False
        for folder, recursive in self._watched_folders():
            if (folder, recursive) not in self._scheduled:
                observer.schedule(
                    self._handler, str(folder), recursive=recursive, event_filter=_EVENT_TYPES
                )
                self._scheduled.add((folder, recursive))
                added = True
        return added

    def _watch_new_folders(self) -> bool:
        observer = self._observer
        if observer is None:
            return False
        try:
            return self._schedule(observer)
        except OSError as exc:
            logger.warning("%s: cannot watch (%s); relying on the rescan", self.hive.root, exc)
            return False

    # A timeout parameter (not asyncio.timeout) because None is the normal "nothing yet".
    async def next(self, timeout: float | None = None) -> HiveEvent | None:  # noqa: ASYNC109
        """The next event, or None after `timeout` seconds."""
        try:
            return await asyncio.wait_for(self.events.get(), timeout)
        except TimeoutError:
            return None

    # -- from raw paths to events ------------------------------------------------
    def _threadsafe(self, callback: Any, *args: Any) -> None:
        loop = self._loop
        if loop is None or self._state is not _State.RUNNING:
            return
        if threading.get_ident() == self._loop_thread:
            loop.call_soon(callback, *args)  # events read on the loop (no self-pipe write)
            return
        with contextlib.suppress(RuntimeError):  # the loop closed under us
            loop.call_soon_threadsafe(callback, *args)

    def _kick_rescan(self) -> None:
        self._kick.set()

    def _queue_raw(self, path: Path, *, wake: bool = True, closed: bool | None = None) -> None:
        """From the handler (in any thread): queue the path (and what the event said of
        its writer, see `_closed_by`); wake the loop if `wake` and no wake-up is on its
        way already. A path queued without one waits for the next (or the rescan)."""
        with self._inbox_lock:
            self._inbox.append((path, closed))
            first = wake and not self._woken
            self._woken = self._woken or wake
        if first:
            self._threadsafe(self._take_inbox)

    def _take_inbox(self) -> None:
        """Every queued path, in the order the OS reported them, starts settling."""
        with self._inbox_lock:
            paths, self._inbox, self._woken = self._inbox, [], False
        for path, closed in paths:
            self._on_raw(path, closed)

    def _on_raw(self, path: Path, closed: bool | None = None) -> None:
        """`path` changed; `closed`: what the event said of its writer (None: nothing,
        as for a change the rescan found)."""
        if self._state is not _State.RUNNING:
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

    def _arm(self, delay: float) -> None:
        """Make sure the settle check runs within `delay` seconds."""
        loop = self._loop
        if loop is None or self._checking is not None:
            return  # a check is running; it re-arms for what is left
        when = loop.time() + max(0.0, delay)
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = loop.call_at(when, self._start_check)

    def _start_check(self) -> None:
        self._timer = None
        if self._state is _State.RUNNING and self._checking is None:
            self._checking = asyncio.create_task(self._check_settled(), name="hive-settle")

    async def _check_settled(self) -> None:
        """Hand on every path that has been still for settle_time: no OS event for that
        long and an mtime at least that old (or, with a skewed clock, an unchanged stat).
        On a local disk the stats are taken right here (microseconds each); with
        polling (a network filesystem) in a worker thread, one trip per batch."""
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
            logger.exception("%s: could not check changed files", self.hive.root)
        finally:
            self._checking = None
            if self._last_raw and self._state is _State.RUNNING:
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
        try:
            rel = path.relative_to(self.hive.root).as_posix()
        except ValueError:
            rel = ""
        kinds = classify(rel, self.watch_globs) if rel else []
        if sig is not None and any(kind in _WHOLE_FIRST for kind, _ in kinds):
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
            if rel:
                self._hand_on(path, sig, kinds, again=held)
        except Exception:
            logger.exception("%s: could not hand the change on", path)

    def _writer_wait(self, path: Path, sig: Sig, wall: float) -> float:
        """Seconds before the task or message at `path` may be whole (0.0: it is): its
        writer closed it, by the kernel's word or an event's, else it has been still
        for the fallback time (by its mtime, or since its last event)."""
        still_for = max(wall - sig[2] / 1e9, time.monotonic() - self._last_raw[path])
        return settling.whole_in(path, still_for, self._closed.get(path), self._fallback)

    def _hand_on(
        self, path: Path, sig: Sig | None, kinds: list[tuple[HiveEventKind, str | None]],
        *, again: bool = False,
    ) -> None:
        """Emit the events of a settled change; `again`: even if the file is as it was
        last handed on (it was held while a writer had it open)."""
        if sig is None:
            if self._known.pop(path, None) is None:
                return
            for kind, agent in kinds:
                if kind is HiveEventKind.ROM_CHANGED and agent in self._agents:
                    self._agents.discard(agent)
                    self._emit(HiveEventKind.AGENT_REMOVED, path, agent)
                elif kind in (HiveEventKind.KNOWLEDGE_CHANGED, HiveEventKind.FILE_CHANGED):
                    self._emit(kind, path, agent)
            return  # a task claimed or a message read is not news
        if self._known.get(path) == sig and not again:
            return  # the same unchanged file reported again
        self._known[path] = sig
        for kind, agent in kinds:
            if (
                kind is HiveEventKind.ROM_CHANGED
                and agent is not None
                and agent not in self._agents
            ):
                self._agents.add(agent)
                self._emit(HiveEventKind.AGENT_ADDED, path, agent)
            else:
                self._emit(kind, path, agent)

    def _emit(self, kind: HiveEventKind, path: Path, agent: str | None) -> None:
        self.events.put_nowait(HiveEvent(kind, path, agent))

    # -- the rescan ----------------------------------------------------------------
    async def _rescan_loop(self) -> None:
        # Until closed, not `while True`: Python 3.11's wait_for can swallow the cancel
        # that `aclose` sends when the kick comes in the same instant, and `aclose` would
        # then wait for this loop for ever (a daemon's stop hung so, once).
        while self._state is _State.RUNNING:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self.rescan_interval)
            self._kick.clear()
            try:
                adding = (
                    self._watch_new_folders()  # its watches belong to the loop's thread
                    if isinstance(self._observer, inotify.LoopInotify)
                    else await asyncio.to_thread(self._watch_new_folders)
                )
                if adding:
                    # A folder made a moment ago (a mailbox's new/ after the mailbox) may
                    # have had files put in it before its watch: look again right after.
                    self._kick.set()
                ignored: dict[str, str] = {}
                found = await asyncio.to_thread(
                    snapshot, self.hive, self.watch_globs, ignored
                )
            except OSError as exc:
                logger.warning("%s: rescan failed: %s", self.hive.root, exc)
                continue
            self._reconcile(found)
            self._tell_ignored(ignored, forget=True)

    def _reconcile(self, snapshot: dict[Path, Sig]) -> None:
        """Feed every difference between disk and what was handed on through settling."""
        self._take_inbox()  # paths the OS reported first, in their order
        for path, sig in snapshot.items():
            if self._known.get(path) != sig and path not in self._last_raw:
                self._on_raw(path)
        for path in [p for p in self._known if p not in snapshot]:
            if path not in self._last_raw:
                self._on_raw(path)

    def _tell_ignored(self, ignored: dict[str, str], *, forget: bool = False) -> None:
        """Say once per file (on the console, in the log) that an entry of tasks/ is not
        read as a task (`ignored`: name -> why). `forget`: `ignored` is all of them now;
        a name gone since is told again if it comes back."""
        for name, why in ignored.items():
            if name not in self._told:
                logger.warning("%s", why)
        if forget:
            self._told = set(ignored)
        else:
            self._told.update(ignored)

    def rescan_now(self) -> None:
        """Ask for a rescan at once (e.g. after a folder was moved in)."""
        self._kick.set()
