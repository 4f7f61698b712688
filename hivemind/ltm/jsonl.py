"""The JSONL exchange format of `hivemind memory import` / `export`.

One JSON object per line. `content` is required; `id`, `timestamp` (ISO 8601),
`importance` (0–1), `domain`, `task_type` and `tags` are optional. An export
line also carries kind, tier, project, agent, task_id, status, preference,
source_ids, last_accessed, access_count and goal_values, so it re-imports as is.

An id may appear once per file (a repeat is a bad line); a line whose id is
already in the store updates that memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hivemind.ltm.importance import heuristic_importance
from hivemind.ltm.records import (
    ImportReport,
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    Tier,
    as_utc,
    utcnow,
)
from hivemind.memory.keys import generate_memory_key

# Besides ISO 8601: the date styles of common chat-log dumps.
_TIME_FORMATS = (
    "%Y/%m/%d %H:%M:%S",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
    "%I:%M %p on %d %B, %Y",
    "%I:%M %p on %d %b, %Y",
    "%d %B %Y",
    "%B %d, %Y",
)
_WEEKDAY = re.compile(r"\s*\((?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\)\s*", re.IGNORECASE)


def parse_time(value: str | float | int | datetime) -> datetime:
    """ISO 8601 (naive = UTC), epoch seconds, or a common chat-log style; ValueError if none."""
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(float(value), UTC)
    text = str(value).strip()
    try:
        return as_utc(datetime.fromisoformat(text))
    except ValueError:
        pass
    cleaned = _WEEKDAY.sub(" ", text).strip()
    for fmt in _TIME_FORMATS:
        try:
            return as_utc(datetime.strptime(cleaned, fmt))
        except ValueError:
            continue
    raise ValueError(f"{text!r} is not an ISO 8601 time (e.g. 2024-05-01T14:30:00Z)")


class ImportLine(BaseModel):
    """One line of an import file; unknown fields are ignored (and reported once)."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)

    content: str = Field(min_length=1)
    id: str | None = Field(default=None, min_length=1, max_length=200)
    timestamp: datetime | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    domain: str | None = None
    task_type: str | None = None
    tags: list[str] = Field(default_factory=list)
    kind: MemoryKind = MemoryKind.EPISODIC
    tier: Tier | None = None
    project: str | None = None
    agent: str | None = None
    task_id: str | None = None
    status: MemoryStatus = MemoryStatus.ACTIVE
    preference: bool = False
    source_ids: list[str] = Field(default_factory=list)
    last_accessed: datetime | None = None
    access_count: int = Field(default=0, ge=0)
    goal_values: dict[str, float] = Field(default_factory=dict)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content is empty")
        return value

    @field_validator("timestamp", "last_accessed", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        return None if value is None else parse_time(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _one_tag(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def parse_lines(
    lines: Iterable[str],
) -> Iterator[tuple[int, ImportLine | None, str | None]]:
    """(line number, parsed line or None, problem or None) per non-blank line."""
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            yield number, None, f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})"
            continue
        if not isinstance(data, dict):
            yield number, None, f"line {number}: expected a JSON object, got {type(data).__name__}"
            continue
        try:
            yield number, ImportLine.model_validate(data), None
        except ValidationError as exc:
            yield number, None, f"line {number}: {describe(exc)}"


def describe(exc: ValidationError) -> str:
    """The first problem of a validation error, in words ("content is missing")."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    if not field:
        return message
    if err["type"] == "missing":
        return f"{field} is missing"
    if err["type"] == "string_too_short":
        return f"{field} is empty"
    got = err.get("input")
    shown = "" if isinstance(got, dict | list) else f" (got {json.dumps(got, default=str)})"
    return f"{field}: {message}{shown}"


def export_line(record: MemoryRecord) -> dict[str, Any]:
    """A record as one re-importable JSON object (vectors are left out: they are re-made)."""
    return {
        "id": record.id,
        "content": record.content,
        "timestamp": record.created_at.isoformat(),
        "importance": record.importance,
        "domain": record.domain,
        "task_type": record.task_type,
        "tags": record.tags,
        "kind": record.kind.value,
        "tier": record.tier.value,
        "project": record.project,
        "agent": record.agent,
        "task_id": record.task_id,
        "status": record.status.value,
        "preference": record.preference,
        "source_ids": record.source_ids,
        "last_accessed": record.last_accessed.isoformat(),
        "access_count": record.access_count,
        "goal_values": record.goal_values,
    }


def to_record(line: ImportLine, project: str | None, agent: str | None) -> MemoryRecord:
    """The record an import line describes; `project`/`agent` fill in what the line leaves out."""
    created = line.timestamp or utcnow()
    owner_project = line.project or project
    tier = line.tier or (Tier.PROJECT if owner_project else Tier.GLOBAL)
    fields: dict[str, Any] = {} if line.id is None else {"id": line.id}
    importance = line.importance
    if importance is None:
        importance = heuristic_importance(line.content)
    return MemoryRecord(
        **fields, key=generate_memory_key(line.content, line.domain, line.task_type),
        content=line.content, kind=line.kind, tier=tier,
        project=owner_project if tier is not Tier.GLOBAL else None,
        agent=line.agent or agent, task_id=line.task_id, domain=line.domain,
        task_type=line.task_type, tags=line.tags,
        importance=importance,
        created_at=created, last_accessed=line.last_accessed or created,
        access_count=line.access_count, source_ids=line.source_ids, status=line.status,
        preference=line.preference, goal_values=line.goal_values,
    )  # fmt: skip


class ImportSummary(ImportReport):
    """An import's report with how many of the imported lines updated a memory already
    in the store (`imported` counts both)."""

    updated: int = 0

    @property
    def new(self) -> int:
        return self.imported - self.updated


def read_batches(
    lines: Iterable[str],
    project: str | None,
    agent: str | None,
    report: ImportReport,
    size: int,
) -> Iterator[tuple[list[MemoryRecord], int]]:
    """Records of the good lines in batches of `size`, with the lines read for each batch;
    bad lines (a repeated id among them) and ignored fields go into `report`."""
    unknown: set[str] = set()
    first_line: dict[str, int] = {}  # id given in the file -> the line that had it first
    batch: list[MemoryRecord] = []
    number = last = 0
    for number, line, problem in parse_lines(lines):
        if line is None:
            report.errors.append(problem or f"line {number}: unreadable")
            continue
        unknown.update(line.model_extra or {})
        if line.id is not None and line.id in first_line:
            # Which of two lines was meant is a guess: keep the first, name both.
            report.errors.append(
                f"line {number}: id {line.id} already appears on line {first_line[line.id]}"
            )
            continue
        try:
            batch.append(to_record(line, project, agent))
        except ValidationError as exc:
            report.errors.append(f"line {number}: {describe(exc)}")
            continue
        if line.id is not None:
            first_line[line.id] = number
        if len(batch) >= size:
            yield batch, number - last
            batch, last = [], number
    if batch or number > last:
        yield batch, number - last
    if unknown:
        report.warnings.append("ignored unknown fields: " + ", ".join(sorted(unknown)))
