"""The end of one agent's audit log, read a little more at each refresh of `top`.

The first read takes at most `FIRST_READ_BYTES` of the file's end; later ones only
what was appended since (the log only grows; a shorter file was replaced and is
read again from its tail). Lines are read with the bounded `LineReader`, and only
the records `top` shows are kept, a bounded number of them.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from hivemind.agent.audit import parse_record
from hivemind.agent.auditfile import LineReader
from hivemind.agent.record import CycleRecord
from hivemind.cli.top.feed import SHOWN, Record

FIRST_READ_BYTES = 2 * 2**20
"""How much of a log's end the first refresh reads (its cycles of today beyond it are
left out of the day's tokens and cost)."""

KEPT_RECORDS = 200
"""Records kept per agent: the feed and the conversation show the newest."""

PARSED_WHOLE = 40
"""Of the lines one refresh reads, the newest this many are parsed whole."""

_CYCLE_HEAD = re.compile(rb'\{"event": "cycle", "at": "([^"]{1,64})"')
_USAGE = re.compile(rb'"usage": (\{[^{}]{0,400}\})')
_TOKENS = re.compile(rb'"(?:input|output|cache_write|cache_read)_tokens": ([0-9]{1,15})')
_COST = re.compile(rb'"cost": (null|-?[0-9][0-9.eE+-]{0,30})')




@dataclass
class DayUsage:
    """Tokens and estimated cost of the cycles read that ran on `day` (UTC)."""

    day: date | None = None
    tokens: int = 0
    cost: float = 0.0
    unpriced: bool = False  # a cycle of the day had no price (an unknown model, offline)

    def add(self, record: CycleRecord, at: datetime) -> None:
        cost = record.cost
        price = float(cost) if isinstance(cost, (int, float)) and cost >= 0 else None
        self.add_counts(at.astimezone(UTC).date(), max(0, record.tokens), price)

    def add_counts(self, day: date, tokens: int, cost: float | None) -> None:
        if self.day != day:
            if self.day is not None and day < self.day:
                return  # an older line (a log replaced by an older copy): not today's
            self.day, self.tokens, self.cost, self.unpriced = day, 0, 0.0, False
        self.tokens += tokens
        if cost is None:
            self.unpriced = True
        else:
            self.cost += cost


@dataclass
class AuditTail:
    """What `top` keeps of one agent's audit log between refreshes."""

    path: Path
    records: deque[Record] = field(default_factory=lambda: deque(maxlen=KEPT_RECORDS))
    usage: DayUsage = field(default_factory=DayUsage)
    new: list[Record] = field(default_factory=list)  # read at the last refresh
    holding: set[str] = field(default_factory=set)  # tasks of its last cycle start (feed)
    _reader: LineReader | None = None
    _days: dict[bytes, date] = field(default_factory=dict)
    _ident: tuple[int, int] | None = None  # (device, inode): a new file is read anew

    def refresh(self) -> None:
        """Read what was appended since the last refresh (`new` holds it)."""
        self.new = []
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return  # a FIFO or a device in someone's .hivemind/audit/: not read
            ident = (st.st_dev, st.st_ino)
            reader = self._reader
            if reader is None or ident != self._ident or st.st_size < reader.offset:
                self.records.clear()
                self.usage = DayUsage()
                reader = LineReader.at_tail(fh, st.st_size, FIRST_READ_BYTES)
                self._ident = ident
            self._reader = reader
            if reader.offset >= st.st_size:
                return
            lines = list(reader.lines(fh, st.st_size))
        # Of a long stretch (the first read), only the newest lines are parsed whole;
        # the older ones give the day's usage alone, picked out of the line (much faster).
        cut = max(0, len(lines) - PARSED_WHOLE)
        for line in lines[:cut]:
            self._count_usage(line)
        for line in lines[cut:]:
            record = parse_record(line)  # (a line that fits no record model is skipped)
            if not isinstance(record, SHOWN) or record.time is None:
                continue
            if isinstance(record, CycleRecord):
                self.usage.add(record, record.time)
            self.records.append(record)
            self.new.append(record)

    def _count_usage(self, line: bytes) -> None:
        """Add a cycle record's usage and cost to the day's, without parsing it whole.
        Records start `{"event": "cycle", "at": "..."` (`AuditLog.write`); in a JSON
        line a key's quotes are bare only outside strings, so `"usage": {` is the key."""
        head = _CYCLE_HEAD.match(line)
        if head is None:
            return
        day = self._day_of(head[1])
        if day is None:
            return
        usage = _USAGE.search(line)
        tokens = sum(int(n) for n in _TOKENS.findall(usage[1])) if usage else 0
        cost = _COST.search(line)
        try:
            price = float(cost[1]) if cost and cost[1] != b"null" else None
        except ValueError:
            price = None
        self.usage.add_counts(day, tokens, price)

    def _day_of(self, stamp: bytes) -> date | None:
        """The UTC day of an `at` (the runtime writes UTC: its day is its first 10
        characters, read once per day)."""
        key = stamp[:10] if stamp.endswith(b"+00:00") else stamp
        day = self._days.get(key)
        if day is None:
            try:
                at = datetime.fromisoformat(stamp.decode())
            except (ValueError, UnicodeDecodeError):
                return None
            if at.tzinfo is None:
                return None
            day = at.astimezone(UTC).date()
            if len(self._days) < 64:
                self._days[key] = day
        return day

    def last_said(self) -> str:
        """The last line the model wrote (its newest cycle with text)."""
        for rec in reversed(self.records):
            if isinstance(rec, CycleRecord) and rec.text.strip():
                return [line.strip() for line in rec.text.splitlines() if line.strip()][-1]
        return ""

    def cycles(self, limit: int) -> list[CycleRecord]:
        """The newest `limit` cycle records, oldest first."""
        out = [r for r in self.records if isinstance(r, CycleRecord)]
        return out[-limit:]
