"""Reading an audit file bounded in memory and time, whatever its size or lines.

An audit file is in someone else's hive: it may be gigabytes long, or one line
without a newline. Readers take only its tail (`AUDIT_TAIL_BYTES`) and lines of
at most `MAX_RECORD_BYTES`; a longer line is skipped, never held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

AUDIT_TAIL_BYTES = 32 * 2**20
"""How much of the end of an audit file a reader takes (the daemon at start, `hivemind log`)."""

MAX_RECORD_BYTES = 8 * 2**20
"""The longest audit line read; a longer one is skipped."""

_CHUNK = 2**20


@dataclass
class LineReader:
    """The complete lines of an append-only file from `offset` on, none over `cap` bytes."""

    offset: int = 0
    skipping: bool = False
    """Inside a line not to be read (over-long, or cut by the tail): drop up to its newline."""
    overlong: int = 0
    """How many over-long lines were skipped."""
    cap: int = MAX_RECORD_BYTES

    @classmethod
    def at_tail(cls, fh: BinaryIO, size: int, tail: int = AUDIT_TAIL_BYTES) -> LineReader:
        """A reader of the whole lines in the last `tail` of the `size` bytes of `fh`."""
        if size <= tail:
            return cls()
        start = size - tail
        fh.seek(start - 1)
        return cls(offset=start, skipping=fh.read(1) != b"\n")

    def lines(self, fh: BinaryIO, end: int) -> Iterator[bytes]:
        """Each complete line up to `end` (newline included); a last line without its
        newline is left for a later read, `offset` stays at its start."""
        fh.seek(self.offset)
        while self.offset < end:
            if self.skipping:
                chunk = fh.read(min(_CHUNK, end - self.offset))
                if not chunk:
                    return
                newline = chunk.find(b"\n")
                if newline < 0:
                    self.offset += len(chunk)
                    continue
                self.offset += newline + 1
                self.skipping = False
                fh.seek(self.offset)
                continue
            line = fh.readline(min(self.cap + 1, end - self.offset))
            if line.endswith(b"\n"):
                self.offset += len(line)
                yield line
            elif len(line) > self.cap:
                self.overlong += 1
                self.offset += len(line)
                self.skipping = True
            else:
                return  # still being written, or torn by a crash
