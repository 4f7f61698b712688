"""Reading an audit file from its end: its last N records, or those since a time, at a
cost that grows with what is asked for, never with the file; and following it.

A reader stops `AUDIT_TAIL_BYTES` from the end whatever it found, skips a line over
`MAX_RECORD_BYTES` (never holding it whole) and leaves a last line without its newline
(still being written) for the next read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, NamedTuple

from hivemind.agent.audit import parse_record
from hivemind.agent.auditfile import AUDIT_TAIL_BYTES, MAX_RECORD_BYTES, LineReader
from hivemind.agent.record import AnyRecord

_CHUNK = 64 * 1024


class Position(NamedTuple):
    """Where a reader is in an audit file: which file, the end of the last line read,
    and whether it is inside a line it skips (over-long)."""

    inode: int = -1
    offset: int = 0
    skipping: bool = False


@dataclass
class Read:
    """Records read (in file order), where the read ended, and what the reader left out."""

    records: list[AnyRecord] = field(default_factory=list)
    at: Position = field(default_factory=Position)
    notes: list[str] = field(default_factory=list)


def read_last(path: Path, count: int | None = None, since: datetime | None = None) -> Read:
    """The last `count` records of `path` (None: no limit), only those at or after `since`
    (None: any time), read backwards from the end; `at` is the end of the last whole line."""
    opened = _open(path)
    if opened is None:
        return Read()
    fh, st = opened
    with fh:
        end = _end_of_whole_lines(fh, st.st_size)
        out = Read(at=Position(st.st_ino, end))
        if count == 0:
            return out
        newest_first: list[AnyRecord] = []
        backwards = _Backwards(fh, end)
        for line in backwards.lines():
            rec = parse_record(line)
            if rec is None:
                continue
            if since is not None:
                when = rec.time
                if when is None:
                    continue
                if when < since:
                    break
            newest_first.append(rec)
            if count is not None and len(newest_first) >= count:
                break
        if backwards.cut:
            out.notes.append(f"{path} is {st.st_size} bytes: only its last "
                             f"{AUDIT_TAIL_BYTES} are read")
        if backwards.overlong:
            out.notes.append(f"{path}: skipped {backwards.overlong} line(s) over "
                             f"{MAX_RECORD_BYTES} bytes")
        out.records = newest_first[::-1]
        return out


def read_new(path: Path, at: Position) -> Read:
    """The records written to `path` since `at`, and where they end. A file that shrank
    or was replaced is read again from its start; at most `AUDIT_TAIL_BYTES` a call."""
    out = Read(at=at)
    opened = _open(path)
    if opened is None:
        return out
    fh, st = opened
    with fh:
        if st.st_ino != at.inode or st.st_size < at.offset:
            at = Position(st.st_ino)
        reader = LineReader(offset=at.offset, skipping=at.skipping)
        for line in reader.lines(fh, min(st.st_size, reader.offset + AUDIT_TAIL_BYTES)):
            rec = parse_record(line)
            if rec is not None:
                out.records.append(rec)
    if reader.overlong:
        out.notes.append(f"{path}: skipped {reader.overlong} line(s) over "
                         f"{MAX_RECORD_BYTES} bytes")
    out.at = Position(at.inode, reader.offset, reader.skipping)
    return out


def _open(path: Path) -> tuple[BinaryIO, os.stat_result] | None:
    """The file open for reading, if it is a regular file; None if it is missing, a link,
    a FIFO or a device (a log is someone else's folder: never block on it, nor read
    through a link)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    fh = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        fh.close()
        return None
    return fh, st


def _end_of_whole_lines(fh: BinaryIO, size: int) -> int:
    """The offset just past the file's last newline (0 if none within the tail)."""
    pos = size
    while pos > 0 and size - pos < AUDIT_TAIL_BYTES:
        step = min(_CHUNK, pos)
        fh.seek(pos - step)
        newline = fh.read(step).rfind(b"\n")
        if newline >= 0:
            return pos - step + newline + 1
        pos -= step
    return 0


class _Backwards:
    """The whole lines before `end`, newest first (an over-long one skipped and counted)."""

    def __init__(self, fh: BinaryIO, end: int) -> None:
        self.fh, self.end = fh, end
        self.overlong = 0
        self.cut = False  # stopped AUDIT_TAIL_BYTES from the end, before the file's start

    def lines(self) -> Iterator[bytes]:
        pos, carry, skipping = self.end, b"", False
        while pos > 0:
            if self.end - pos >= AUDIT_TAIL_BYTES:
                self.cut = True
                return
            step = min(_CHUNK, pos)
            pos -= step
            self.fh.seek(pos)
            data = self.fh.read(step)
            if skipping:  # the start of an over-long line: up to the newline before it
                newline = data.rfind(b"\n")
                if newline < 0:
                    continue
                data, skipping = data[: newline + 1], False
            pieces = (data + carry).split(b"\n")  # ends with a newline: last piece empty
            for piece in reversed(pieces[1:-1]):
                if len(piece) < MAX_RECORD_BYTES:
                    yield piece
                else:
                    self.overlong += 1
            carry = pieces[0] + b"\n"
            if len(carry) > MAX_RECORD_BYTES:
                self.overlong, carry, skipping = self.overlong + 1, b"", True
        if carry and not skipping:
            yield carry[:-1]
