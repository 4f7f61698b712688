"""The ContentLoader: reads the text of the blocks the selector kept, and nothing else.

Files are cached by (path, mtime_ns, size), so an unchanged file costs one stat:
no read, no tokenisation. Reads and tokenisation run in a worker thread. A file
that is missing, binary, unreadable or shorter than the range asked for becomes
a short visible note, never an exception.
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from hivemind.memory.blocks import FileRef
from hivemind.memory.tokens import TokenCounter

_BINARY_SNIFF = 8192
# A range of a file never read yet: this many tokens per line is generous for code
# and prose; the builder's hard budget catches the rare minified line.
_RANGE_LINE_TOKENS = 48
_MISSING_ESTIMATE = 16
# Data formats cost about twice the tokens per byte of code or prose.
_DENSE_SUFFIXES = (
    ".json", ".jsonl", ".ndjson", ".geojson", ".csv", ".tsv", ".yaml", ".yml", ".toml",
    ".xml", ".svg", ".lock", ".map", ".min.js", ".min.css",
)

StatKey = tuple[int, int]  # (mtime_ns, size)

LEGACY_ENCODING = "cp1252"
"""How a text that is not UTF-8 is read: Windows-1252, Latin-1 with printable
characters where Latin-1 has C1 controls (what such files mostly are)."""
# Bytes of text in an 8-bit code page: printable ASCII, tab, newlines, form feed,
# escape, and every byte cp1252 gives a character. Past 1 other byte in
# _CONTROL_SHARE, a file without valid UTF-8 is binary.
_TEXT_BYTES = bytes(
    b for b in range(256)
    if 0x20 <= b < 0x7F or b in b"\t\n\r\f\x08\x1b" or (
        b >= 0x80 and b not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
    )
)
_CONTROL_SHARE = 20


def _has_utf8_sequences(text: str) -> bool:
    """True if a text decoded from UTF-8 with replacements has any non-ASCII character
    besides U+FFFD: some multi-byte sequence in it was valid."""
    return not text.replace("\ufffd", "").isascii()


INLINE_READ_BYTES = 64 * 1024
"""Files up to this size are read on the event loop; bigger ones in a worker thread."""


@dataclass(slots=True)
class LoadedContent:
    """A block's text and what it costs; `note` flags a problem (`text` then says what)."""

    text: str
    tokens: int
    digest: str
    note: str | None = None
    encoding: str | None = None  # the 8-bit code page a non-UTF-8 text was read with


@dataclass(slots=True, eq=False)  # compared by identity (version tuples)
class _Entry:
    key: StatKey
    text: str
    whole: LoadedContent
    cost: int  # bytes charged to the cache budget
    ranges: dict[tuple[int, int], LoadedContent] = field(default_factory=dict)
    line_starts: list[int] | None = None

    def lines(self) -> list[int]:
        """Offsets where each line starts, plus the end of the text."""
        if self.line_starts is None:
            starts = [0]
            find = self.text.find
            pos = find("\n")
            while pos != -1:
                starts.append(pos + 1)
                pos = find("\n", pos + 1)
            if starts[-1] != len(self.text):
                starts.append(len(self.text))
            self.line_starts = starts
        return self.line_starts


Read = tuple[bytes, os.stat_result]


def _read(full: str, limit: int | None = None) -> Read | None:
    """The bytes of a file and its stat from the open descriptor: `open(full, "rb")`
    without the buffered file object around it (which costs more than reading a note).
    None, unread, if the file is bigger than `limit`."""
    # A hive is someone else's folder: a link is never read through (O_NOFOLLOW: ELOOP),
    # nor a file with a second name, which may be outside the hive; a FIFO never hangs.
    fd = os.open(full, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        fst = os.fstat(fd)
        if stat.S_ISDIR(fst.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), full)
        if stat.S_ISREG(fst.st_mode) and fst.st_nlink > 1:
            raise OSError(errno.EMLINK, f"it has {fst.st_nlink} hard links (not read)", full)
        if not stat.S_ISREG(fst.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (not read)", full)
        if limit is not None and fst.st_size > limit:
            return None
        want = max(fst.st_size + 1, 4096)
        data = os.read(fd, want)
        if len(data) == fst.st_size and stat.S_ISREG(fst.st_mode):
            return data, fst  # all of it: a regular file reads short only at its end
        chunks = [data]  # it grew since the fstat, or it is a pipe or the like
        while chunk := os.read(fd, want):
            chunks.append(chunk)
        return b"".join(chunks), fst
    finally:
        os.close(fd)


class ContentLoader:
    """Loads `FileRef`s under `root` with a byte-bounded LRU keyed by (path, mtime, size)."""

    def __init__(
        self, root: Path | str, counter: TokenCounter, max_cache_bytes: int = 64 * 1024 * 1024
    ) -> None:
        self.root = Path(root)
        self.counter = counter
        self.max_cache_bytes = max_cache_bytes
        self.bytes_read = 0
        self.files_read = 0
        self.files_tokenised = 0
        self._root = os.fspath(self.root)
        self._abs: dict[str, str] = {}
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._cached_bytes = 0
        # Bumped whenever cached content changes (stored, sliced, evicted, invalidated):
        # estimates made at the same generation from the same stats are still valid.
        self.generation = 0
        self._lock = threading.Lock()
        self._path_locks: dict[str, threading.Lock] = {}

    # -- paths ---------------------------------------------------------------
    def resolve(self, path: str) -> str:
        """The absolute path of `path` (relative paths are relative to root)."""
        found = self._abs.get(path)
        if found is None:
            found = path if os.path.isabs(path) else os.path.join(self._root, path)
            if len(self._abs) > 100_000:  # unbounded ids would leak; the dict is a memo only
                self._abs.clear()
            self._abs[path] = found
        return found

    # -- estimates (no read) -------------------------------------------------
    def estimate(self, ref: FileRef) -> int:
        """Tokens `ref` will cost, without reading: exact if cached, else from its size."""
        return self.estimate_location(ref.path, ref.start_line, ref.end_line)

    def estimate_location(
        self,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
        stats: dict[str, StatKey | None] | None = None,
    ) -> int:
        """`estimate` without a FileRef; `stats` memoises stat results for one selection."""
        full = self.resolve(path)
        if stats is not None and full in stats:
            key = stats[full]
        else:
            key = self._stat(full)
            if stats is not None:
                stats[full] = key
        if key is None:
            return _MISSING_ESTIMATE
        entry = self._cache.get(full)
        if entry is not None and entry.key == key:
            if start_line is None or end_line is None:
                return entry.whole.tokens
            hit = entry.ranges.get((start_line, end_line))
            if hit is not None:
                return hit.tokens
            if entry.whole.note is not None:
                return entry.whole.tokens
            starts = entry.lines()
            lo = starts[min(start_line - 1, len(starts) - 1)]
            hi = starts[min(end_line, len(starts) - 1)]
            share = (hi - lo) / max(1, len(entry.text))
            return int(entry.whole.tokens * share * 1.1) + _MISSING_ESTIMATE
        whole = self.counter.estimate_bytes(key[1], dense=path.lower().endswith(_DENSE_SUFFIXES))
        if start_line is None or end_line is None:
            return whole
        return min(whole, (end_line - start_line + 1) * _RANGE_LINE_TOKENS + _MISSING_ESTIMATE)

    def versions(
        self, paths: Iterable[str], stats: dict[str, StatKey | None] | None = None
    ) -> dict[str, tuple[Any, ...]]:
        """What every estimate of each path depends on (one stat each): same version,
        same estimates. `stats` receives the stat results, keyed by absolute path."""
        out: dict[str, tuple[Any, ...]] = {}
        resolve, cache, stat = self.resolve, self._cache, os.stat
        for path in paths:
            full = resolve(path)
            try:
                st = stat(full)
                key: StatKey | None = (st.st_mtime_ns, st.st_size)
            except OSError:
                key = None
            if stats is not None:
                stats[full] = key
            entry = cache.get(full)
            if key is None or entry is None or entry.key != key:
                out[path] = (key,)
            else:
                out[path] = (key, entry, len(entry.ranges))
        return out

    @staticmethod
    def _stat(full: str) -> StatKey | None:
        try:
            st = os.stat(full)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    # -- loading -------------------------------------------------------------
    def peek(self, ref: FileRef) -> LoadedContent | None:
        """The content of `ref` if the cache holds the file unchanged (one stat), else None."""
        return self.peek_location(ref.path, ref.start_line, ref.end_line)

    def peek_location(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> LoadedContent | None:
        """`peek` without a FileRef; the builder's fast path for warm files."""
        full = self.resolve(path)
        entry = self._cache.get(full)
        if entry is None:
            return None
        try:
            st = os.stat(full)
        except OSError:
            return None
        if entry.key != (st.st_mtime_ns, st.st_size):
            return None
        if start_line is None or end_line is None:
            self._touch(full)
            return entry.whole
        hit = entry.ranges.get((start_line, end_line))
        if hit is not None:
            self._touch(full)
        return hit

    async def load(self, ref: FileRef) -> LoadedContent:
        """The text of `ref` (a 1-based inclusive line range if given), read off the loop."""
        # A stat is a metadata call (microseconds) and saves a thread hop on warm files.
        hit = self.peek(ref)
        if hit is not None:
            return hit
        small = self.load_small(ref.path, ref.start_line, ref.end_line)
        if small is not None:
            return small
        return await asyncio.to_thread(self._load_sync, ref.path, ref.start_line, ref.end_line)

    def load_small(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> LoadedContent | None:
        """What `load` returns for a small file, read right here; None for a file that
        `load` reads in a thread (big, or not there).

        A small file (a task, a message, a note) reads in microseconds: a thread hop, or
        even a task on the event loop, costs more than the read.
        """
        full = self.resolve(path)
        if full in self._cache:  # a file seen before: its stat says whether it changed
            key = self._stat(full)
            if key is None or key[1] > INLINE_READ_BYTES:
                return None
            return self._load_sync(path, start_line, end_line, key)
        try:  # a new file: opening it tells its size, no stat needed
            read = _read(full, INLINE_READ_BYTES)
        except OSError:
            return None  # missing, a folder, unreadable: `load` makes the note
        if read is None:
            return None
        return self._load_sync(path, start_line, end_line, read=read)

    def invalidate(self, path: str) -> None:
        """Forget the cached content of `path` (the next load re-reads it)."""
        full = self.resolve(path)
        with self._lock:
            entry = self._cache.pop(full, None)
            self.generation += 1
            if entry is not None:
                self._cached_bytes -= entry.cost

    def _touch(self, full: str) -> None:
        # OrderedDict is not thread-safe for compound updates; loader threads also write.
        with self._lock:
            if full in self._cache:
                self._cache.move_to_end(full)

    def _load_sync(
        self, path: str, start: int | None, end: int | None, key: StatKey | None = None,
        read: Read | None = None,
    ) -> LoadedContent:
        """Load `path` (a range of it), reading it unless the cache holds it unchanged;
        `key`: the file's stat, if the caller just took it; `read`: the file, if the
        caller just read it."""
        full = self.resolve(path)
        with self._lock:
            if len(self._path_locks) > 10_000:  # a memo, not state: a rare double read at worst
                self._path_locks.clear()
            plock = self._path_locks.setdefault(full, threading.Lock())
        # One reader per path: a whole-file block and a range of it share one read.
        with plock:
            entry = self._entry_for(path, full, key, read)
            if isinstance(entry, LoadedContent):
                return entry
            if start is None or end is None:
                return entry.whole
            return self._slice(entry, path, start, end)

    def _entry_for(
        self, path: str, full: str, key: StatKey | None = None, read: Read | None = None
    ) -> _Entry | LoadedContent:
        if read is not None:
            return self._entry_from(path, full, *read)
        if key is None:
            try:
                st = os.stat(full)
            except FileNotFoundError:
                return self._note(f"[file not found: {path}]", "missing")
            except OSError as exc:
                return self._note(
                    f"[file unreadable: {path}: {exc.strerror or exc}]", "unreadable"
                )
            key = (st.st_mtime_ns, st.st_size)
        entry = self._cache.get(full)
        if entry is not None and entry.key == key:
            return entry
        try:
            data, fst = cast(Read, _read(full))
        except FileNotFoundError:
            return self._note(f"[file not found: {path}]", "missing")
        except IsADirectoryError:
            return self._note(f"[file unreadable: {path} is a directory]", "unreadable")
        except OSError as exc:
            why = "a link (not read)" if exc.errno == errno.ELOOP else exc.strerror or exc
            return self._note(f"[file unreadable: {path}: {why}]", "unreadable")
        return self._entry_from(path, full, data, fst)

    def _entry_from(self, path: str, full: str, data: bytes, fst: os.stat_result) -> _Entry:
        """The cache entry of the bytes just read from `full` (stat `fst`), stored."""
        with self._lock:
            self.bytes_read += len(data)
            self.files_read += 1
        key = (fst.st_mtime_ns, fst.st_size)
        whole, text = self._decode(path, data)
        entry = _Entry(key=key, text=text, whole=whole, cost=len(data) + 256)
        # A file that grew or shrank while being read gets a key that never matches again.
        if len(data) == fst.st_size:
            self._store(full, entry)
        return entry

    def _decode(self, path: str, data: bytes) -> tuple[LoadedContent, str]:
        if not data:
            return self._note(f"[empty file: {path}]", "empty"), ""
        if b"\x00" in data[:_BINARY_SNIFF]:
            return self._binary(path, data)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", errors="replace")
            if not _has_utf8_sequences(text):
                # Not one valid multi-byte sequence: text from an 8-bit code page
                # (Latin-1, Windows-1252), unless control bytes say it is binary.
                if len(data.translate(None, _TEXT_BYTES)) * _CONTROL_SHARE > len(data):
                    return self._binary(path, data)
                text = data.decode(LEGACY_ENCODING, errors="replace")
                return self._content(text, LEGACY_ENCODING), text
            # UTF-8 with some bad bytes: kept, unless they are most of it.
            if text.count("\ufffd") * 10 > len(text):
                return self._binary(path, data)
        return self._content(text), text

    def _binary(self, path: str, data: bytes) -> tuple[LoadedContent, str]:
        return self._note(f"[binary file: {path}, {len(data)} bytes]", "binary"), ""

    def _slice(self, entry: _Entry, path: str, start: int, end: int) -> LoadedContent:
        hit = entry.ranges.get((start, end))
        if hit is not None:
            return hit
        if entry.whole.note is not None:
            return entry.whole
        starts = entry.lines()
        nlines = len(starts) - 1
        if start > nlines:
            loaded = self._note(
                f"[lines {start}-{end} of {path}: the file has only {nlines} lines]", "range"
            )
            text = loaded.text
        else:
            text = entry.text[starts[start - 1] : starts[min(end, nlines)]]
            loaded = self._content(text, entry.whole.encoding)
        with self._lock:
            entry.ranges[(start, end)] = loaded
            entry.cost += len(text) + 128
            self._cached_bytes += len(text) + 128
            self.generation += 1
        return loaded

    def _content(self, text: str, encoding: str | None = None) -> LoadedContent:
        digest = self.counter.digest(text)
        tokens = self.counter.cached(digest, as_json=True)
        if tokens is None:
            tokens = self.counter.count_with_digest(text, digest, as_json=True)
            with self._lock:
                self.files_tokenised += 1
        return LoadedContent(text=text, tokens=tokens, digest=digest, encoding=encoding)

    def _note(self, text: str, note: str) -> LoadedContent:
        digest = self.counter.digest(text)
        return LoadedContent(
            text, self.counter.count_with_digest(text, digest, as_json=True), digest, note
        )

    def _store(self, full: str, entry: _Entry) -> None:
        with self._lock:
            old = self._cache.pop(full, None)
            self.generation += 1
            if old is not None:
                self._cached_bytes -= old.cost
            self._cache[full] = entry
            self._cached_bytes += entry.cost
            while self._cached_bytes > self.max_cache_bytes and len(self._cache) > 1:
                _, gone = self._cache.popitem(last=False)
                self._cached_bytes -= gone.cost

    @property
    def cached_bytes(self) -> int:
        """Bytes the cache holds now (bounded by `max_cache_bytes`)."""
        return self._cached_bytes
