"""An excerpt of a text file for read_file: the whole lines of a range that fit a
character budget, read in chunks so that no file, nor one long line, is ever held
whole in memory. Lines are split at \\n, as the FILE block loader splits them."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hivemind.errors import ToolError

SNIFF_BYTES = 8192
"""A NUL byte this near the start marks a binary file."""
MAX_SCAN_BYTES = 32_000_000
"""read_file reads no further into a file than this (to reach a range, or count lines)."""
_CHUNK = 1 << 20


@dataclass
class Excerpt:
    """What read_file shows: `body` holds lines `first`-`last`; `last` < `first` when
    none. `total` is the file's line count, None if it is past `MAX_SCAN_BYTES`."""

    body: str
    first: int
    last: int
    total: int | None
    size: int
    cut_note: str = ""  # set when the one line shown is too long to show whole


def read_excerpt(
    path: Path, shown: str, start: int, end: int | None, budget: int, max_lines: int
) -> Excerpt:
    """Lines `start`-`end` of `path` (numbered `{n:>5}  text`), as many as fit `budget`
    characters and `max_lines`; a first line longer than the budget is cut."""
    size = _text_file_size(path, shown)
    with path.open("rb") as fh:
        if b"\x00" in fh.read(SNIFF_BYTES):
            raise ToolError(f"{shown}: binary file, not shown")
        fh.seek(0)
        scan = _LineScan(fh, keep=4 * budget)  # a character is at most 4 bytes
        scan.skip_to(start)
        stop = start + max_lines - 1 if end is None else min(end, start + max_lines - 1)
        parts: list[str] = []
        used, last, cut_note = 0, start - 1, ""
        reached = scan.number == start  # else the file ends, or the scan, before `start`
        for number, head, length in scan.lines() if reached else ():
            prefix = f"{number:>5}  "
            line = prefix + head.decode("utf-8", errors="replace").removesuffix("\r")
            if used + len(line) + 1 > budget:
                if parts:
                    break  # the next call starts at this line
                line = line[:budget]
                rest = length - len(line[len(prefix) :].encode("utf-8"))
                cut_note = f"[... line {number} is cut here; {rest}{'+' if scan.capped else ''} "
                cut_note += "more bytes of it are not shown]"
            parts.append(line)
            used += len(line) + 1
            last = number
            if number >= stop or cut_note:
                break
        total = scan.count_to_end()
    if not parts and (start > 1 or total is None):
        if total is None:
            raise ToolError(
                f"{shown}: line {start} is not within the first {MAX_SCAN_BYTES} bytes "
                f"of this {size} byte file, and read_file reads no further"
            )
        raise ToolError(f"{shown} has {total} lines; start_line {start} is past the end")
    return Excerpt("\n".join(parts), start, last, total, size, cut_note)


def _text_file_size(path: Path, shown: str) -> int:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ToolError(f"{shown}: no such file") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown} is a folder; list_files shows what is in it")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{shown}: not a regular file")  # reading a fifo would block
    return st.st_size


class _LineScan:
    """The lines of a binary file, read in chunks, no further than `MAX_SCAN_BYTES`:
    skipped fast up to a line, then each yielded as its first `keep` bytes and its
    length, then counted to the end."""

    def __init__(self, fh: BinaryIO, keep: int) -> None:
        self._fh = fh
        self._keep = keep
        self._buf = b""
        self._pos = 0
        self._read = 0
        self.number = 1  # the line the next unread byte belongs to
        self.partial = 0  # the bytes of that line already passed
        self.capped = False  # the scan stopped at MAX_SCAN_BYTES before the end

    def _fill(self) -> bool:
        """The next chunk into the buffer; False at the end of the file or of the scan."""
        if self._read >= MAX_SCAN_BYTES:
            self.capped = self._fh.read(1) != b""
            return False
        self._buf = self._fh.read(min(_CHUNK, MAX_SCAN_BYTES - self._read))
        self._pos = 0
        self._read += len(self._buf)
        return bool(self._buf)

    def _pass(self, newlines: int) -> None:
        """Move past the rest of the buffer, which holds `newlines` newlines."""
        buf = self._buf
        self.number += newlines
        if newlines:
            self.partial = len(buf) - buf.rfind(b"\n") - 1
        else:
            self.partial += len(buf) - self._pos
        self._pos = len(buf)

    def skip_to(self, start: int) -> None:
        while self.number < start:
            if self._pos >= len(self._buf) and not self._fill():
                return
            newlines = self._buf.count(b"\n", self._pos)
            if self.number + newlines < start:
                self._pass(newlines)
                continue
            while self.number < start:
                self._pos = self._buf.index(b"\n", self._pos) + 1
                self.number += 1
            self.partial = 0

    def lines(self) -> Iterator[tuple[int, bytes, int]]:
        """From the current line on: (number, first `keep` bytes, length in bytes)."""
        head = bytearray()
        while True:
            if self._pos >= len(self._buf) and not self._fill():
                if self.partial:  # a last line with no newline, or one cut by the cap
                    number, length = self.number, self.partial
                    self.number, self.partial = number + 1, 0
                    yield number, bytes(head), length
                return
            buf, pos = self._buf, self._pos
            newline = buf.find(b"\n", pos)
            end = len(buf) if newline < 0 else newline
            if len(head) < self._keep:
                head += buf[pos : min(end, pos + self._keep - len(head))]
            self.partial += end - pos
            if newline < 0:
                self._pos = end
                continue
            self._pos = newline + 1
            number, length = self.number, self.partial
            self.number, self.partial = number + 1, 0
            yield number, bytes(head), length
            head.clear()

    def count_to_end(self) -> int | None:
        """The file's line count, reading on to its end; None past `MAX_SCAN_BYTES`."""
        while self._pos < len(self._buf) or self._fill():
            self._pass(self._buf.count(b"\n", self._pos))
        return None if self.capped else self.number - 1 + (1 if self.partial else 0)
