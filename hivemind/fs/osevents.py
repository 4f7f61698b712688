"""OS file events for an event loop: folders watched, events read, paths handed over.

On Linux the loop reads inotify itself (`fs/inotify.py`); elsewhere, and when
polling, a watchdog observer thread reads the events. Each event's paths are judged
where it is read (an `EventSink`: string work, no syscall); those worth a look are
queued, and the loop is woken once per batch (`OsEvents.queue`), not once per event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

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

from hivemind.fs import inotify

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
EVENT_TYPES: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
]


class EventSink(Protocol):
    """Judges each path of an event, where the event is read (any thread)."""

    def file_event(self, rel: str, path: str, left: bool, closed: bool | None) -> None:
        """`path` (`rel`: below the root, POSIX) changed; `left`: it is gone from there
        (deleted, or the source of a move); `closed`: see `closed_by`."""

    def folder_event(self, rel: str) -> None:
        """The folder `rel` (below the root, POSIX) was made, moved or removed."""


def closed_by(event: FileSystemEvent, left: bool) -> bool | None:
    """What an event says of its file's writer: True closed after its last write (or put
    in place whole: a rename, a link), False written and not closed since, None nothing."""
    if left:
        return None
    kind = event.event_type
    if kind == "modified":
        return False
    return True if kind in ("closed", "created", "moved") else None


class _Handler(FileSystemEventHandler):
    """Runs where the OS events are read (watchdog's thread, or the loop): each path
    below the root goes to the sink."""

    def __init__(self, root: Path, sink: EventSink) -> None:
        self.prefix = str(root) + os.sep
        self.sink = sink

    def on_any_event(self, event: FileSystemEvent) -> None:
        dest = getattr(event, "dest_path", "")
        gone = event.event_type in ("deleted", "moved")  # the source path no longer is
        for raw, left in ((event.src_path, gone), (dest, False)):
            text = os.fsdecode(raw) if raw else ""
            if not text.startswith(self.prefix):
                continue
            rel = text[len(self.prefix) :].replace(os.sep, "/")
            if event.is_directory:
                self.sink.folder_event(rel)
            else:
                self.sink.file_event(rel, text, left, closed_by(event, left))


class OsEvents:
    """The OS events of some folders below `root`, read on `loop`, handed to the sink;
    paths the sink queues reach `on_batch` on the loop, a batch per wake-up. Made on
    the loop."""

    def __init__(
        self,
        root: Path,
        sink: EventSink,
        loop: asyncio.AbstractEventLoop,
        *,
        folders: Callable[[], Iterable[tuple[Path, bool]]],
        on_batch: Callable[[], None],
        on_lost: Callable[[], None],
        poll: bool = False,
        poll_interval: float = 1.0,
    ) -> None:
        self.root = root
        self.poll = poll
        self.poll_interval = poll_interval
        self.observer: Any = None
        self.running = True
        self._loop = loop
        self._loop_thread = threading.get_ident()  # made on the loop
        self._handler = _Handler(root, sink)
        self._folders = folders  # (folder, recursive) to watch now: looked up on each call
        self.on_batch = on_batch
        self._on_lost = on_lost  # events were dropped: look at the disk again
        self._scheduled: set[tuple[Path, bool]] = set()
        # Paths from the sink, handed over in batches (one loop wake-up).
        self.inbox: list[tuple[Path, bool | None]] = []
        self._inbox_lock = threading.Lock()
        self._woken = False  # an `on_batch` is on its way to the loop

    # -- watching ------------------------------------------------------------------
    def start_on_loop(self) -> None:
        """Read inotify on the loop (see `inotify.available`); with no OS events (a
        system limit, say), the caller's rescan still sees every change."""
        reader = None
        try:
            reader = inotify.LoopInotify(on_lost=self._on_lost)
            self._schedule(reader)
        except OSError as exc:  # the limit on inotify instances or watches
            if reader is not None:
                reader.stop()
            self._cannot_watch(exc)
            return
        reader.start()
        self.observer = reader

    def start_observer(self) -> None:
        """Start a watchdog observer thread (blocking: call it from a worker thread)."""
        observer = PollingObserver(timeout=self.poll_interval) if self.poll else Observer()
        try:
            self._schedule(observer)
            observer.start()
        except OSError as exc:  # e.g. the inotify watch limit
            self._cannot_watch(exc)
            return
        self.observer = observer

    @property
    def on_loop(self) -> bool:
        """True if the events are read on the loop (then `watch` runs there too)."""
        return isinstance(self.observer, inotify.LoopInotify)

    def watch(self) -> bool:
        """Watch the folders not watched yet (a mailbox made since, for one); True if
        there were any. In the loop's thread if `on_loop`, else in a worker thread."""
        if self.observer is None:
            return False
        try:
            return self._schedule(self.observer)
        except OSError as exc:
            self._cannot_watch(exc)
            return False

    def _schedule(self, observer: Any) -> bool:
        added = False
        for folder, recursive in self._folders():
            if (folder, recursive) not in self._scheduled:
                observer.schedule(
                    self._handler, str(folder), recursive=recursive, event_filter=EVENT_TYPES
                )
                self._scheduled.add((folder, recursive))
                added = True
        return added

    def _cannot_watch(self, exc: OSError) -> None:
        logger.warning("%s: cannot watch (%s); relying on the rescan", self.root, exc)

    def close(self) -> None:
        """Hand nothing more to the loop (`stop` stops reading)."""
        self.running = False

    async def stop(self) -> None:
        """Stop reading events; an observer thread is joined."""
        self.running = False
        if self.observer is not None:
            observer, self.observer = self.observer, None
            observer.stop()
            if not isinstance(observer, inotify.LoopInotify):  # it has no thread
                await asyncio.shield(asyncio.to_thread(observer.join))

    # -- handing paths to the loop -------------------------------------------------
    def threadsafe(self, callback: Callable[..., None], *args: Any) -> None:
        """Run `callback(*args)` on the loop soon, from any thread (not once stopped)."""
        if not self.running:
            return
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(callback, *args)  # events read on the loop (no self-pipe write)
            return
        with contextlib.suppress(RuntimeError):  # the loop closed under us
            self._loop.call_soon_threadsafe(callback, *args)

    def queue(self, path: Path, *, wake: bool = True, closed: bool | None = None) -> None:
        """From the sink (in any thread): queue the path (and what the event said of its
        writer, see `closed_by`); wake the loop if `wake` and no wake-up is on its way
        already. A path queued without one waits for the next (or the rescan)."""
        with self._inbox_lock:
            self.inbox.append((path, closed))
            first = wake and not self._woken
            self._woken = self._woken or wake
        if first:
            self.threadsafe(self.on_batch)

    def take(self) -> list[tuple[Path, bool | None]]:
        """Every queued path, in the order the OS reported them."""
        with self._inbox_lock:
            paths, self.inbox, self._woken = self.inbox, [], False
        return paths
