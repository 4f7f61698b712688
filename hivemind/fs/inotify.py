"""Linux inotify read on the event loop itself: no observer thread.

watchdog's inotify observer runs three threads that take turns with the event
loop for the interpreter lock; in a busy daemon (each claim, delivery and
completion is an event) that costs the loop a share of its core. Here the
inotify descriptor is one more reader of the loop: a burst of events is one
`read`, parsed in place, and handed on as watchdog events to the same handler.

Folders are watched by themselves or with every folder below them (a folder made
later is watched as it appears; what was written into it before that, the
watcher's rescan finds). A queue overflow asks for a rescan as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, cast

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileSystemEvent,
)

from hivemind.fs.treewalk import walk

__all__ = ["LoopInotify", "available"]

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

# What a change is made of (opening and reading a file are not): the same events as
# the watchdog event types the watcher asks for.
MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE
        | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)
_READ_SIZE = 64 * 1024


class _Dispatch(Protocol):
    def dispatch(self, event: FileSystemEvent) -> None: ...


class _Libc:
    """The three inotify calls, through ctypes (no library for it is needed)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes, self.init1.restype = [ctypes.c_int], ctypes.c_int
        self.add_watch = libc.inotify_add_watch
        self.add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.add_watch.restype = ctypes.c_int
        self.rm_watch = libc.inotify_rm_watch
        self.rm_watch.argtypes, self.rm_watch.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int


def _load() -> _Libc | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return _Libc()
    except (OSError, AttributeError):
        return None


_libc = _load()


def available() -> bool:
    """True where inotify can be read on the loop (Linux)."""
    return _libc is not None


def _raise_errno(what: str, path: Path | None = None) -> None:
    err = ctypes.get_errno()
    where = f"{path}: " if path is not None else ""
    raise OSError(err, f"{where}{what}: {os.strerror(err)}")


class LoopInotify:
    """An inotify descriptor read by the running event loop (create it on that loop).

    It stands in for a watchdog observer: `schedule`, `start`, `stop`, `join`; the
    handler's `dispatch` gets the events, in the loop's thread. A move is handed on
    as the removal of its source and the creation of its destination.
    """

    def __init__(self, on_lost: Callable[[], None]) -> None:
        assert _libc is not None, "inotify is not available here (see available())"
        self._loop = asyncio.get_running_loop()
        self._on_lost = on_lost  # events were dropped (queue overflow): look again
        fd = _libc.init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            _raise_errno("inotify_init1")
        self._fd = fd
        self._dirs: dict[int, tuple[str, bool]] = {}  # wd -> (folder, recursive)
        self._inodes: dict[int, tuple[int, int]] = {}  # wd -> (device, inode) when watched
        self._handler: _Dispatch | None = None
        self._reading = False

    # -- the observer's interface ------------------------------------------------
    def schedule(self, handler: Any, path: str, *, recursive: bool = False,
                 event_filter: Any = None) -> None:
        """Watch `path` (and, if `recursive`, every folder below it). `event_filter` is
        watchdog's parameter: the events asked for here are always `MASK`'s."""
        self._handler = cast(_Dispatch, handler)
        self._watch(path, recursive)
        if recursive:
            for below in _folders_below(path):
                self._watch(below, True)

    def start(self) -> None:
        if not self._reading and self._fd >= 0:
            self._loop.add_reader(self._fd, self._readable)
            self._reading = True

    def stop(self) -> None:
        if self._fd < 0:
            return
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False
        os.close(self._fd)
        self._fd = -1

    def join(self, timeout: float | None = None) -> None:
        """Nothing to wait for: no thread (a watchdog observer's join)."""

    # -- watches ------------------------------------------------------------------
    def _watch(self, folder: str, recursive: bool) -> None:
        assert _libc is not None
        wd = _libc.add_watch(self._fd, os.fsencode(folder), MASK)
        if wd < 0:
            _raise_errno("inotify_add_watch", Path(folder))
        old = self._dirs.get(wd)  # the same folder, maybe under the name it had before
        self._dirs[wd] = (folder, recursive or (old is not None and old[1]))
        with contextlib.suppress(OSError):
            self._inodes[wd] = _inode(folder)

    def _forget(self, wd: int) -> None:
        self._inodes.pop(wd, None)
        self._dirs.pop(wd, None)

    def _watch_new_folder(self, folder: str) -> None:
        """A folder made (or moved in) below a recursive watch: watch it and its own."""
        try:
            self._watch(folder, True)
            for below in _folders_below(folder):
                self._watch(below, True)
        except OSError:
            pass  # gone already, or the watch limit: the rescan still sees its files
        self._on_lost()  # files may have been put in it before its watch

    # -- events -----------------------------------------------------------------------
    def _readable(self) -> None:
        try:
            data = os.read(self._fd, _READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.stop()
            self._on_lost()
            return
        for event in self._events(data):
            if self._handler is not None:
                self._handler.dispatch(event)

    def _events(self, data: bytes) -> Iterator[FileSystemEvent]:
        offset, size = 0, len(data)
        while offset + _HEADER.size <= size:
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            name = data[offset : offset + length].rstrip(b"\0")
            offset += length
            if mask & IN_Q_OVERFLOW:
                self._on_lost()
                continue
            watched = self._dirs.get(wd)
            if watched is None:
                continue
            folder, recursive = watched
            if mask & IN_IGNORED:
                self._forget(wd)
                continue
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                if mask & IN_MOVE_SELF and not _same_folder(folder, self._inodes.get(wd)):
                    # Moved out of every watched folder (one it moved into has already
                    # given the watch its new name): its events would carry the old name.
                    assert _libc is not None
                    _libc.rm_watch(self._fd, wd)
                    self._forget(wd)
                    self._on_lost()
                continue
            if not name or name[:1] == b".":
                # Hidden names, the hive's own temp files (`.x.tmp`) among them, are never
                # news: left out before they cost an event (a finished task's copy is
                # written beside it in tasks/active/<agent>/ under one).
                continue
            path = os.path.join(folder, os.fsdecode(name))
            yield from self._translate(path, mask, recursive)

    def _translate(self, path: str, mask: int, recursive: bool) -> Iterator[FileSystemEvent]:
        if mask & IN_ISDIR:
            if mask & (IN_CREATE | IN_MOVED_TO):
                if recursive:
                    self._watch_new_folder(path)
                yield DirCreatedEvent(path)
            elif mask & (IN_DELETE | IN_MOVED_FROM):
                yield DirDeletedEvent(path)
            return  # a folder's own times changing is no news
        if mask & (IN_CREATE | IN_MOVED_TO):
            yield FileCreatedEvent(path)
        elif mask & (IN_DELETE | IN_MOVED_FROM):
            yield FileDeletedEvent(path)
        elif mask & IN_CLOSE_WRITE:
            yield FileClosedEvent(path)
        else:
            yield FileModifiedEvent(path)


def _inode(folder: str) -> tuple[int, int]:
    st = os.stat(folder)
    return st.st_dev, st.st_ino


def _same_folder(folder: str, inode: tuple[int, int] | None) -> bool:
    """True if `folder` is still the folder whose inode was noted (not another made
    under its name since)."""
    try:
        return inode is not None and _inode(folder) == inode
    except OSError:
        return False


def _folders_below(folder: str) -> list[str]:
    """Every folder below `folder`, to `treewalk.MAX_DEPTH` levels (links not followed)."""
    out: list[str] = []
    for dirpath, dirnames, _files in walk(folder):
        out.extend(os.path.join(dirpath, d) for d in dirnames)
    return out
