"""The audit trail: `.hivemind/audit/<agent>.jsonl`, one JSON object a line.

A cycle writes a `cycle_start` line before it calls the model and one `cycle`
record when it ends; a start without its record is an interrupted cycle, which
the next daemon marks with an `interrupted` line. Writes are appended and
flushed to disk before the cycle's mail is marked read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hivemind.agent.auditfile import AUDIT_TAIL_BYTES, MAX_RECORD_BYTES, LineReader
from hivemind.agent.record import (
    AnyRecord,
    AuditRecord,
    BudgetNotice,
    CycleRecord,
    CycleStart,
    Interrupted,
    RomFixed,
    RomProblem,
    read_record,
)
from hivemind.clock import utcnow
from hivemind.fs import diskspace
from hivemind.fs.filenames import shown
from hivemind.fs.flush import fsync_all
from hivemind.fs.loopflusher import LoopFlusher

logger = logging.getLogger(__name__)

_REDACT_KEYS = ("api_key", "authorization", "x-api-key")


def parse_record(line: str | bytes) -> AnyRecord | None:
    """The record on one line of an audit file; None for a blank, torn or foreign line
    (anything but a JSON object that fits a record)."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", errors="replace")
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return None
    return read_record(rec) if isinstance(rec, dict) else None


def _fields(record: AuditRecord) -> dict[str, Any]:
    """The line of `record`: `event` and `at` first, then each field it was given."""
    given = record.model_fields_set
    data = record.model_dump()
    return {"event": record.event, "at": record.at,
            **{k: v for k, v in data.items() if k in given and k not in ("event", "at")}}


def _redact(obj: Any, secrets: tuple[str, ...]) -> Any:
    """Drop secret-looking keys and any known secret values from a record."""
    if isinstance(obj, dict):
        return {
            k: ("[redacted]" if k.lower() in _REDACT_KEYS else _redact(v, secrets))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_redact(v, secrets) for v in obj]
    if isinstance(obj, str) and secrets:
        for s in secrets:
            if s and s in obj:
                obj = obj.replace(s, "[redacted]")
    return obj


def _printable(obj: Any) -> Any:
    """`obj` with its strings (keys too) passed through `filenames.shown`; any other
    value as JSON would show it (`default=str`)."""
    if isinstance(obj, str):
        return shown(obj)
    if isinstance(obj, dict):
        return {(shown(k) if isinstance(k, str) else k): _printable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_printable(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    return shown(str(obj))


# O_NOFOLLOW: a link in the audit folder is never appended through (see hive.links).
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW


class AuditLog:
    """Append-only JSONL audit of one agent."""

    def __init__(self, path: Path, secrets: tuple[str, ...] = (), *, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync
        self._secrets = tuple(s for s in secrets if s)
        self._tail_checked = False
        self._told: set[str] = set()  # what `records` has warned of: once each

    def append(self, record: AuditRecord) -> AuditRecord:
        """Write `record` (stamped with `at`) durably; returns it."""
        self.write(record)
        if self.fsync:
            fsync_all([self.path])
        return record

    def write(self, record: AuditRecord) -> AuditRecord:
        """Append `record`, stamped with `at` now, not flushed yet: see `flushed`. Its
        line holds the fields it was given (all a cycle record has) and no others."""
        record.at = utcnow().isoformat()
        self._append(_fields(record))
        return record

    def _append(self, record: dict[str, Any]) -> None:
        line = self._line(record)
        try:
            data = line.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (a file name that is not UTF-8, a model's `\ud800`): the
            # record is written with it escaped rather than failing the cycle.
            record = _printable(record)
            data = self._line(record).encode("utf-8")
        data = self._torn_tail().encode("utf-8") + data + b"\n"
        try:
            fd = os.open(self.path, _APPEND, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, _APPEND, 0o644)
        try:
            # One write: an O_APPEND line is never interleaved with another writer's.
            view = memoryview(data)
            while view:
                view = view[diskspace.write(fd, view, self.path) :]
        finally:
            os.close(fd)

    def _line(self, record: dict[str, Any]) -> str:
        line = json.dumps(record, default=str, ensure_ascii=False)
        if self._needs_redacting(line):
            line = json.dumps(_redact(record, self._secrets), default=str, ensure_ascii=False)
        return line

    def flushed(self, *, lazy: bool = False) -> asyncio.Future[None]:
        """Done once every record written so far is on disk (at once if fsync is off).
        `lazy`: the flush rides with the next one asked for on this loop (`kick` starts
        it if none is), so a cycle's start line and its tools' files share one trip."""
        loop = asyncio.get_running_loop()
        if not self.fsync:
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        return LoopFlusher.of(loop).request([self.path], lazy=lazy)

    def kick(self) -> None:
        """Start the flush of lazy requests now if nothing else has (see `flushed`)."""
        if self.fsync:
            LoopFlusher.of(asyncio.get_running_loop()).kick()

    def _needs_redacting(self, line: str) -> bool:
        """True if the JSON line holds a secret-looking key or a known secret.

        JSON escapes a string character by character, so a secret inside any string
        of the record shows in the line as the secret's own escaped form.
        """
        lowered = line.lower()
        return any(f'"{k}":' in lowered for k in _REDACT_KEYS) or any(
            s in line or json.dumps(s, ensure_ascii=False)[1:-1] in line for s in self._secrets
        )

    def _torn_tail(self) -> str:
        """A newline to write first if the file ends inside a line (a write a kill cut short).

        Without it the first record of the next run would be glued to the torn line
        and lost with it. Only a previous process can have torn it: checked once.
        """
        if self._tail_checked:
            return ""
        self._tail_checked = True
        try:
            with open(self.path, "rb") as fh:
                if fh.seek(0, os.SEEK_END) == 0:
                    return ""
                fh.seek(-1, os.SEEK_END)
                return "" if fh.read(1) == b"\n" else "\n"
        except FileNotFoundError:
            return ""

    def records(self) -> Iterator[AnyRecord]:
        """Every record in the file's last `AUDIT_TAIL_BYTES`, in order; a torn last line
        (crash mid-write) and a line over `MAX_RECORD_BYTES` are skipped."""
        if not self.path.is_file():
            return
        with open(self.path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            reader = LineReader.at_tail(fh, size)
            if reader.offset:
                self._tell("tail", "%s is %d bytes: only its last %d are read",
                           self.path, size, AUDIT_TAIL_BYTES)
            for line in reader.lines(fh, size):
                rec = parse_record(line)
                if rec is not None:
                    yield rec
            if reader.overlong:
                self._tell("overlong", "%s: skipped a line over %d bytes",
                           self.path, MAX_RECORD_BYTES)

    def _tell(self, what: str, message: str, *args: object) -> None:
        """Warn of `what` once for this log."""
        if what not in self._told:
            self._told.add(what)
            logger.warning(message, *args)

    def mark_interrupted(self) -> list[int]:
        """Append an `interrupted` record for each cycle that started but never ended
        (and note `last_cycle` and `config_error` on the way)."""
        open_cycles: dict[int, CycleStart] = {}
        last_cycle = 0
        for rec in self.records():
            if isinstance(rec, (RomProblem, RomFixed)):
                self.config_error = rec.error if isinstance(rec, RomProblem) else None
            n = rec.cycle
            if n is None:
                continue
            last_cycle = max(last_cycle, n)
            if isinstance(rec, CycleStart):
                open_cycles[n] = rec
            elif isinstance(rec, (CycleRecord, Interrupted)):
                open_cycles.pop(n, None)
        for n, start in sorted(open_cycles.items()):
            self.append(Interrupted(cycle=n, started_at=start.at, tasks=start.tasks,
                                    mail=start.mail))
        self.last_cycle = last_cycle
        return sorted(open_cycles)

    last_cycle: int = 0
    config_error: str | None = None
    """The ROM problem the log last told of (None: none, or fixed since); read by
    `mark_interrupted`."""

    def warnings_since(self, since: datetime) -> set[str]:
        """The budget notices a person was given (`budget` records): a task's for good,
        a day's if given since `since` (the start of today)."""
        warned: set[str] = set()
        for rec in self.records():
            if not isinstance(rec, BudgetNotice) or rec.warned is None:
                continue
            if rec.warned.startswith("day:"):
                at = rec.time
                if at is None or at < since:
                    continue
            warned.add(rec.warned)
        return warned

    def usage_since(
        self, since: datetime, task_since: Mapping[str, datetime] | None = None
    ) -> tuple[int, dict[str, int]]:
        """Tokens spent since `since` in all, and per task (for budgets after a restart);
        a task of `task_since` (a retried one) counts only from its time there."""
        total = 0
        per_task: dict[str, int] = {}
        starts = task_since or {}
        for rec in self.records():
            if not isinstance(rec, CycleRecord):
                continue
            spent = rec.tokens
            at = rec.time
            for tid in rec.tasks:
                start = starts.get(tid)
                if start is not None and (at is None or not at_or_after(at, start)):
                    continue
                per_task[tid] = per_task.get(tid, 0) + spent
            if at is not None and at >= since:
                total += spent
        return total, per_task


def at_or_after(at: object, start: datetime) -> bool:
    """True if a record's `at` is a time at or after `start` (naive times taken as UTC)."""
    try:
        when = at if isinstance(at, datetime) else datetime.fromisoformat(str(at))
    except ValueError:
        return False

    def aware(t: datetime) -> datetime:
        return t if t.tzinfo is not None else t.replace(tzinfo=UTC)

    return aware(when) >= aware(start)
