"""An excerpt of a text file for read_file: the whole lines of a range that fit a
character budget, read in chunks so that no file, nor one long line, is ever held
whole in memory. Lines are split at \\n, as the FILE block loader splits them."""

from __future__ import annotations

import codecs
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
    """What read_file shows: `body` holds lines `first`-`last`, the first of them from
    its character `first_char`; `last` < `first` when none. `total` is the file's line
    count, None if it is past `MAX_SCAN_BYTES`."""

    body: str
    first: int
    last: int
    total: int | None
    size: int
    first_char: int = 0
    cut_note: str = ""  # set when the one line shown is too long to show whole


def read_excerpt(
    path: Path, shown: str, start: int, end: int | None, budget: int, max_lines: int,
    start_char: int = 0,
) -> Excerpt:
    """Lines `start`-`end` of `path` (numbered `{n:>5}  text`), the first from its
    character `start_char`, as many as fit `budget` characters and `max_lines`; a first
    line longer than the budget is cut, and the note says where to read on."""
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
        prefix = f"{start:>5}  "
        # Else the file ends, or the scan, before `start`.
        first = scan.line_part(start_char, budget - len(prefix)) if scan.number == start else None
        if first is not None:
            if start_char and start_char >= first.chars:
                raise _past_line_end(shown, start, start_char, first, size)
            parts.append(prefix + first.text)
            used, last = len(parts[0]) + 1, start
            cut_note = _cut_note(start, start_char + len(first.text), first)
        more = first is not None and not cut_note and start < stop
        for number, head in scan.lines() if more else ():
            line = f"{number:>5}  " + head.decode("utf-8", errors="replace").removesuffix("\r")
            if used + len(line) + 1 > budget:
                break  # the next call starts at this line
            parts.append(line)
            used += len(line) + 1
            last = number
            if number >= stop:
                break
        total = scan.count_to_end()
    if not parts and (start > 1 or total is None):
        if total is None:
            raise ToolError(
                f"{shown}: line {start} is not within the first {MAX_SCAN_BYTES} bytes "
                f"of this {size} byte file, and read_file reads no further"
            )
        raise ToolError(f"{shown} has {total} lines; start_line {start} is past the end")
    return Excerpt("\n".join(parts), start, last, total, size, start_char, cut_note)


def _cut_note(number: int, shown_to: int, line: _LinePart) -> str:
    """What read_file says after line `number`, shown up to character `shown_to`: how
    to read the rest (nothing when it was shown whole)."""
    if line.complete and shown_to >= line.chars:
        return ""
    if shown_to >= line.chars:  # the scan stopped inside the line, right here
        return (f"[... line {number} is cut here; it goes on past the first "
                f"{MAX_SCAN_BYTES} bytes of the file, and read_file reads no further]")
    rest = f"{line.chars - shown_to}{'' if line.complete else '+'}"
    return (f"[... line {number} is cut here; {rest} more characters of it are not shown; "
            f"ask for start_line={number}, start_char={shown_to}]")


def _past_line_end(
    shown: str, number: int, start_char: int, line: _LinePart, size: int
) -> ToolError:
    if not line.complete:
        return ToolError(
            f"{shown}: character {start_char} of line {number} is not within the first "
            f"{MAX_SCAN_BYTES} bytes of this {size} byte file, and read_file reads no further"
        )
    return ToolError(
        f"{shown}: line {number} has {line.chars} characters; start_char {start_char} is "
        f"past its end (start_char counts from 0)"
    )


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


@dataclass
class _LinePart:
    """A part of one line: `text`, out of the line's `chars` characters; `complete` is
    False when the scan stopped before the line's end (it has more)."""

    text: str
    chars: int
    complete: bool


class _LineScan:
    """The lines of a binary file, read in chunks, no further than `MAX_SCAN_BYTES`:
    skipped fast up to a line, then each yielded as its first `keep` bytes, then counted
    to the end."""

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
            # Sticky: a second look would read past the byte the first one found.
            self.capped = self.capped or self._fh.read(1) != b""
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

    def line_part(self, skip: int, room: int) -> _LinePart | None:
        """The current line from its character `skip` on, at most `room` characters of
        it, and its length in characters; None at the end of the file (or of the scan).

        Decoded as the other lines are (UTF-8, bad bytes replaced, a CR before the line's
        end dropped), in chunks: only the part shown is kept."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        kept: list[str] = []
        chars, ended, started, tail = 0, False, False, ""
        while not ended:
            if self._pos >= len(self._buf) and not self._fill():
                break
            started = True
            buf, pos = self._buf, self._pos
            newline = buf.find(b"\n", pos)
            ended = newline >= 0
            end = newline if ended else len(buf)
            piece = decoder.decode(buf[pos:end], final=ended)
            self._pos = end + 1 if ended else end
            if skip + room > chars and skip < chars + len(piece):
                kept.append(piece[max(0, skip - chars) : skip + room - chars])
            chars += len(piece)
            tail = piece[-1:] or tail
        if not started:
            return None
        complete = ended or not self.capped
        if not ended and complete:  # the file ends inside a character: it is replaced
            piece = decoder.decode(b"", final=True)
            if skip + room > chars and piece:
                kept.append(piece[max(0, skip - chars) : skip + room - chars])
            chars += len(piece)
            tail = piece[-1:] or tail
        if complete and tail == "\r":
            chars -= 1
        self.number, self.partial = self.number + 1, 0
        return _LinePart("".join(kept)[: max(0, chars - skip)], chars, complete)

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """From the current line on: (number, first `keep` bytes)."""
        head = bytearray()
        while True:
            if self._pos >= len(self._buf) and not self._fill():
                if self.partial:  # a last line with no newline, or one cut by the cap
                    number = self.number
                    self.number, self.partial = number + 1, 0
                    yield number, bytes(head)
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
            number = self.number
            self.number, self.partial = number + 1, 0
            yield number, bytes(head)
            head.clear()

    def count_to_end(self) -> int | None:
        """The file's line count, reading on to its end; None past `MAX_SCAN_BYTES`."""
        while self._pos < len(self._buf) or self._fill():
            self._pass(self._buf.count(b"\n", self._pos))
        return None if self.capped else self.number - 1 + (1 if self.partial else 0)
