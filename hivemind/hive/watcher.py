"""Hive events for the daemon: OS events for speed, a periodic rescan for certainty.

OS events (`fs/osevents.py`: inotify read on the loop on Linux, else a watchdog
observer thread) name raw paths; the watcher keeps those the hive's layout makes
news of (`hive/changes.py`). A path becomes a `HiveEvent` once its size and mtime
have been stable for `settle_time`, and only if it differs from what was last handed
on (duplicates coalesce). A task or a message is handed on only once its writer is
done with it (`fs/settling.py`): closed, by the kernel's word or a close-write event,
else still for a longer fallback time. Every `rescan_interval` a stat snapshot of the
watched files is diffed against what was handed on, so an event the OS dropped (or a
filesystem without inotify) is caught anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from hivemind.fs import inotify
from hivemind.fs.globs import glob_root
from hivemind.fs.osevents import OsEvents
from hivemind.fs.settling import Settler
from hivemind.fs.statcache import Sig
from hivemind.hive.changes import HiveEventKind, classify, not_a_task, snapshot
from hivemind.hive.layout import HUMAN, Hive, is_temp_name

__all__ = ["HiveEvent", "HiveEventKind", "HiveWatcher", "classify"]

logger = logging.getLogger(__name__)

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


class _Sink:
    """Runs where the OS events are read (watchdog's thread, or the loop): judges each
    path by its name, then queues it for the loop (`OsEvents.queue`)."""

    def __init__(self, watcher: HiveWatcher) -> None:
        self.watcher = watcher

    def file_event(self, rel: str, path: str, left: bool, closed: bool | None) -> None:
        watcher = self.watcher
        if kinds := classify(rel, watcher.watch_globs):
            news = not left or any(kind not in _GONE_IS_NO_NEWS for kind, _ in kinds)
            watcher._source.queue(Path(path), wake=news, closed=closed)
        elif not left and rel.startswith("tasks/") and rel.count("/") == 1:
            why = not_a_task(rel[6:])
            if why is not None:
                watcher._source.threadsafe(watcher._tell_ignored, {rel[6:]: why})

    def folder_event(self, rel: str) -> None:
        watcher = self.watcher
        parts = rel.split("/")
        if parts[0] == "agents" and len(parts) == 2 and not is_temp_name(parts[1]):
            rom = watcher.hive.rom_path(parts[1])
            watcher._source.threadsafe(watcher._settler.changed, rom)
        elif not any(is_temp_name(p) for p in parts):
            # A folder moved in or out carries files no event names: look now.
            watcher._source.threadsafe(watcher._kick_rescan)


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
        self._rescanner: asyncio.Task[None] | None = None
        self._kick = asyncio.Event()
        self._known: dict[Path, Sig] = {}
        self._agents: set[str] = set()
        self._told: set[str] = set()  # names in tasks/ said not to be read as tasks
        # Made on the loop, when entered: OS events read and queued, and the paths
        # they name waiting to settle.
        self._source: OsEvents
        self._settler: Settler[list[tuple[HiveEventKind, str | None]]]

    # -- lifecycle -------------------------------------------------------------
    async def __aenter__(self) -> HiveWatcher:
        if self._state is not _State.NEW:
            raise RuntimeError("a HiveWatcher cannot be reopened; create a new one")
        self._state = _State.RUNNING
        loop = asyncio.get_running_loop()
        ignored: dict[str, str] = {}
        self._known = await asyncio.to_thread(snapshot, self.hive, self.watch_globs, ignored)
        self._tell_ignored(ignored, forget=True)
        self._agents = {p.parent.name for p in self._known if p.name == "ROM.md"}
        self._settler = Settler(
            loop, sort=self._sort, hand_on=self._hand_on, settle_time=self.settle_time,
            poll=self.poll, where=self.hive.root,
        )
        self._source = OsEvents(
            self.hive.root, _Sink(self), loop, folders=self._watched_folders,
            on_batch=self._take_inbox, on_lost=self._kick_rescan, poll=self.poll,
            poll_interval=self.poll_interval,
        )
        if self.os_events and self._on_loop():
            self._source.start_on_loop()
        elif self.os_events:
            await asyncio.to_thread(self._source.start_observer)
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
        self._source.close()
        if self._rescanner is not None:
            self._rescanner.cancel()
        await self._settler.close()
        if self._rescanner is not None:
            await asyncio.gather(self._rescanner, return_exceptions=True)
        await self._source.stop()

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

    # A timeout parameter (not asyncio.timeout) because None is the normal "nothing yet".
    async def next(self, timeout: float | None = None) -> HiveEvent | None:  # noqa: ASYNC109
        """The next event, or None after `timeout` seconds."""
        try:
            return await asyncio.wait_for(self.events.get(), timeout)
        except TimeoutError:
            return None

    # -- from raw paths to events ------------------------------------------------
    def _kick_rescan(self) -> None:
        self._kick.set()

    def _take_inbox(self) -> None:
        """Every path the OS events queued, in the order they were reported, starts
        settling."""
        changed = self._settler.changed
        for path, closed in self._source.take():
            changed(path, closed)

    def _sort(self, path: Path) -> tuple[list[tuple[HiveEventKind, str | None]], bool] | None:
        """What a change of `path` is news of, and whether the file is read only once its
        writer is done with it; None for a path outside the hive."""
        try:
            rel = path.relative_to(self.hive.root).as_posix()
        except ValueError:
            return None
        kinds = classify(rel, self.watch_globs)
        return kinds, any(kind in _WHOLE_FIRST for kind, _ in kinds)

    def _hand_on(
        self, path: Path, sig: Sig | None, kinds: list[tuple[HiveEventKind, str | None]],
        again: bool = False,
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
                    self._source.watch()  # its watches belong to the loop's thread
                    if self._source.on_loop
                    else await asyncio.to_thread(self._source.watch)
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
        settler = self._settler
        for path, sig in snapshot.items():
            if self._known.get(path) != sig and path not in settler:
                settler.changed(path)
        for path in [p for p in self._known if p not in snapshot]:
            if path not in settler:
                settler.changed(path)

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
