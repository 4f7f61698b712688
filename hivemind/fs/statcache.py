"""Parsed files cached by their stat, so an unchanged file is never parsed twice.

The cache knows files, not formats: whoever makes a `StatCache` gives it the
function that reads a file's text (the hive's `document.read_text`).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Generic, TypeVar

from hivemind.errors import FileFormatError

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

Sig = tuple[int, int, int]

# File times tick in jiffies (~4 ms): a file changed within this margin of our
# read may have changed again with the same size and mtime ("racy git").
RACY_MARGIN = 0.1


def sig_of(st: os.stat_result) -> Sig:
    """Inode, size and mtime: a file with the same three has not changed."""
    return st.st_ino, st.st_size, st.st_mtime_ns


def lstat_sig(path: Path) -> Sig | None:
    """The `sig_of` of what is at `path` (not followed); None for a folder or nothing."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return None if stat.S_ISDIR(st.st_mode) else sig_of(st)


class StatMemo(Generic[K, T]):
    """key -> value parsed from a file, trusted while the file's stat is unchanged.

    The key is whatever names the file for the caller (a Path, or a plain string where
    building a Path per file and scan would cost more than the scan)."""

    def __init__(self) -> None:
        self._entries: dict[K, tuple[Sig, float, T]] = {}

    def get(self, key: K, st: os.stat_result) -> T | None:
        """The cached value if the file has not changed since it was parsed."""
        hit = self._entries.get(key)
        if hit is None or hit[0] != sig_of(st) or hit[1] - st.st_mtime < RACY_MARGIN:
            return None
        return hit[2]

    def put(self, key: K, st: os.stat_result, value: T, read_at: float) -> T:
        """Remember `value` parsed from the file of `key` (stat `st`) at time `read_at`."""
        self._entries[key] = (sig_of(st), read_at, value)
        return value

    def load_as(self, key: K, st: os.stat_result, parse: Callable[[], T]) -> T:
        """The cached value, else `parse()` remembered under `st`."""
        hit = self.get(key, st)
        if hit is not None:
            return hit
        read_at = time.time()
        return self.put(key, st, parse(), read_at)

    def __len__(self) -> int:
        return len(self._entries)


class StatCache(Generic[T]):
    """path -> value parsed from the file's text, trusted while its stat is unchanged.

    A file read within `RACY_MARGIN` of its mtime may have changed again since, under
    the same stat. Its text is kept with the value until a later look finds the file
    as read (the bytes compared, not parsed again: a burst of new files is parsed once)
    and old enough to trust its stat from then on.
    """

    def __init__(self, read: Callable[[Path], str]) -> None:
        self._read = read  # a file's text; its OSError and FileFormatError propagate
        # path -> (sig, read at, value, the text parsed while its stat is not trusted)
        self._entries: dict[Path, tuple[Sig, float, T, str | None]] = {}

    def get(self, path: Path, st: os.stat_result) -> T | None:
        """The cached value if the file has not changed since it was parsed (a racy
        entry is checked against the file's text)."""
        return self._current(path, st, self._entries.get(path))

    def load(self, path: Path, st: os.stat_result, parse: Callable[[str, Path], T]) -> T:
        """The cached value, else `parse(text, path)` of the file's text, remembered
        under `st` (the reader's and `parse`'s errors propagate)."""
        hit = self._current(path, st, self._entries.get(path))
        if hit is not None:
            return hit
        read_at = time.time()
        text = self._read(path)
        return self._put(path, st, parse(text, path), read_at, text)

    def remember(self, path: Path, st: os.stat_result, value: T, read_at: float) -> T:
        """Cache `value`, made from the file of `path` (stat `st`) read at `read_at` by
        other means than `load` (no text kept: a racy one is made again next time)."""
        self._entries[path] = (sig_of(st), read_at, value, None)
        return value

    def _current(
        self, path: Path, st: os.stat_result, hit: tuple[Sig, float, T, str | None] | None
    ) -> T | None:
        if hit is None or hit[0] != sig_of(st):
            return None
        if hit[1] - st.st_mtime >= RACY_MARGIN:
            return hit[2]
        if hit[3] is None:
            return None
        read_at = time.time()
        try:
            same = self._read(path) == hit[3]
        except (OSError, FileFormatError):
            same = False
        if not same:
            del self._entries[path]  # changed: read and parsed anew
            return None
        self._put(path, st, hit[2], read_at, hit[3])
        return hit[2]

    def _put(self, path: Path, st: os.stat_result, value: T, read_at: float, text: str) -> T:
        racy = read_at - st.st_mtime < RACY_MARGIN
        self._entries[path] = (sig_of(st), read_at, value, text if racy else None)
        return value

    def peek(self, path: Path) -> T | None:
        """The last value parsed from `path`, without checking the file again."""
        hit = self._entries.get(path)
        return hit[2] if hit is not None else None

    def moved(self, old: Path, new: Path, st: os.stat_result) -> T | None:
        """After a rename: the value parsed from `old` if `new` is that same unchanged file."""
        hit = self._entries.pop(old, None)
        if hit is None:
            return None
        self._entries[new] = hit
        found = self.get(new, st)
        if found is None:
            self._entries.pop(new, None)
        return found

    def forget(self, path: Path) -> None:
        self._entries.pop(path, None)

    def keep_only(self, folder: Path, present: Iterable[Path]) -> None:
        """Drop entries of files in `folder` that are no longer there."""
        keep = set(present)
        for path in [p for p in self._entries if p.parent == folder and p not in keep]:
            del self._entries[path]

    def __len__(self) -> int:
        return len(self._entries)
