"""Parsed files cached by their stat, so an unchanged file is never parsed twice."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

Sig = tuple[int, int, int]

# File times tick in jiffies (~4 ms): a file changed within this margin of our
# read may have changed again with the same size and mtime ("racy git").
RACY_MARGIN = 0.1


def sig_of(st: os.stat_result) -> Sig:
    """Inode, size and mtime: a file with the same three has not changed."""
    return st.st_ino, st.st_size, st.st_mtime_ns


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


class StatCache(StatMemo[Path, T]):
    """path -> value parsed from the file, trusted while its stat is unchanged."""

    def load(self, path: Path, st: os.stat_result, parse: Callable[[Path], T]) -> T:
        """The cached value, else `parse(path)` remembered under `st`."""
        hit = self.get(path, st)
        if hit is not None:
            return hit
        read_at = time.time()
        return self.put(path, st, parse(path), read_at)

    def peek(self, path: Path) -> T | None:
        """The last value parsed from `path`, without checking the file again."""
        hit = self._entries.get(path)
        return hit[2] if hit is not None else None

    def moved(self, old: Path, new: Path, st: os.stat_result) -> T | None:
        """After a rename: the value parsed from `old` if `new` is that same unchanged file."""
        hit = self._entries.pop(old, None)
        if hit is None or hit[0] != sig_of(st) or hit[1] - st.st_mtime < RACY_MARGIN:
            return None
        self._entries[new] = hit
        return hit[2]

    def forget(self, path: Path) -> None:
        self._entries.pop(path, None)

    def keep_only(self, folder: Path, present: Iterable[Path]) -> None:
        """Drop entries of files in `folder` that are no longer there."""
        keep = set(present)
        for path in [p for p in self._entries if p.parent == folder and p not in keep]:
            del self._entries[path]
