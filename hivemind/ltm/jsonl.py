"""The JSONL exchange format of `hivemind memory import` / `export`.

One JSON object per line (UTF-8, a leading BOM and CRLF line ends accepted).
`content` is required, at most `MAX_CONTENT_CHARS` characters and not blank
(invisible characters alone count as blank); `id`, `timestamp` (ISO 8601),
`importance` (0–1), `domain`, `task_type` and `tags` are optional. An export
line also carries importance_by (heuristic, model or given), kind, tier, project,
agent, task_id, status, preference, source_ids, last_accessed, access_count and
goal_values, so it re-imports as is.

A memory's identity is its scope plus its id (see `scopes`): a line lands in the
scope it names (`project`, `tier`, `task_id`; the import's `project` puts every line
in that project, whatever the line says) and updates only the memory with its id
there, never one of another scope. A line that names no scope updates the one memory
with its id wherever it is (it is refused if several scopes hold that id), else it
is global. An update keeps what the line does not give: what was learned (access
count, last access, goal values), its vector while the content stays. A null counts
as absent. An id may appear once per scope in a file (a repeat is a bad line).
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
    MAX_CONTENT_CHARS,
    ImportanceSource,
    ImportReport,
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    Tier,
    as_utc,
    is_blank,
    utcnow,
)
from hivemind.ltm.scopes import scope_key
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
    importance_by: ImportanceSource | None = None
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
        if is_blank(value):
            raise ValueError("content is empty")
        if len(value.strip()) > MAX_CONTENT_CHARS:
            raise ValueError(
                f"content is too long ({len(value.strip()):,} characters; "
                f"at most {MAX_CONTENT_CHARS:,})"
            )
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
        # A BOM (Windows editors) opens the file only; strip() takes CRLF's \r.
        text = (raw.removeprefix("\ufeff") if number == 1 else raw).strip()
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
    if message.startswith(f"{field} "):  # the validator named the field ("content is empty")
        return message
    got = err.get("input")
    shown = "" if isinstance(got, dict | list) else f" (got {_shown(got)})"
    return f"{field}: {message}{shown}"


def _shown(value: Any, limit: int = 60) -> str:
    """`value` as JSON, cut short: a refused line may be megabytes long."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def export_line(record: MemoryRecord) -> dict[str, Any]:
    """A record as one re-importable JSON object (vectors are left out: they are re-made)."""
    return {
        "id": record.id,
        "content": record.content,
        "timestamp": record.created_at.isoformat(),
        "importance": record.importance,
        "importance_by": record.importance_by and record.importance_by.value,
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


# Line fields copied onto the record when the line gives them (not null).
_COPIED = (
    "content", "importance", "importance_by", "domain", "task_type", "tags", "kind", "agent",
    "task_id", "status", "preference", "source_ids", "last_accessed", "access_count", "goal_values",
)  # fmt: skip


def to_record(
    line: ImportLine,
    project: str | None = None,
    agent: str | None = None,
    *,
    stored: MemoryRecord | None = None,
    vector: tuple[str, list[float]] | None = None,
) -> MemoryRecord:
    """The record an import line describes: the `stored` memory with that id (if any)
    updated with what the line gives. `project` overrides the line's own project (and
    makes a global line a project one); `agent` fills in a line without an author;
    `vector` is (model, embedding) of the line's content. ValidationError if invalid."""
    given = {
        name: value
        for name in line.model_fields_set
        if (value := getattr(line, name, None)) is not None
    }
    fields: dict[str, Any] = stored.model_dump() if stored is not None else {}
    fields.update({name: given[name] for name in _COPIED if name in given})
    if "importance" in given and "importance_by" not in given:
        fields["importance_by"] = ImportanceSource.GIVEN
    if "timestamp" in given:
        fields["created_at"] = given["timestamp"]
    if "agent" not in given and agent:
        fields["agent"] = agent
    if stored is None:
        if line.id is not None:
            fields["id"] = line.id
        created = fields.setdefault("created_at", utcnow())
        fields.setdefault("last_accessed", created)
        if "importance" not in fields:
            fields["importance"] = heuristic_importance(line.content)
            fields["importance_by"] = ImportanceSource.HEURISTIC
    tier, owner = _owner(line, stored, project)
    fields["tier"], fields["project"] = tier, owner if tier is not Tier.GLOBAL else None
    fields["key"] = generate_memory_key(
        fields["content"], fields.get("domain"), fields.get("task_type")
    )
    if vector is not None:
        fields["embedding_model"], fields["embedding"] = vector
    elif stored is not None and stored.content != fields["content"]:
        fields["embedding_model"] = fields["embedding"] = None  # it described the old text
    return MemoryRecord.model_validate(fields)


def named_owner(line: ImportLine, project: str | None) -> tuple[Tier, str | None] | None:
    """The tier and project a line puts its memory in (the import's `project` first,
    a global line made a project one), or None if it names neither."""
    named = project or line.project
    tier = line.tier
    if project and tier in (None, Tier.GLOBAL):
        tier = Tier.PROJECT
    elif tier is None:
        tier = Tier.PROJECT if named else None
    if tier is None or (tier is Tier.PROJECT and not named):
        return None
    return tier, None if tier is Tier.GLOBAL else named


def line_scope(line: ImportLine, project: str | None) -> str | None:
    """The scope a line names (see `named_owner`), or None if it names none."""
    owner = named_owner(line, project)
    if owner is None:
        return None
    tier, named = owner
    return scope_key(tier, named, line.task_id if tier is Tier.TASK else None)


def _owner(
    line: ImportLine, stored: MemoryRecord | None, project: str | None
) -> tuple[Tier, str | None]:
    """Tier and project: those the line names, else the stored memory's, else global."""
    owner = named_owner(line, project)
    if owner is not None:
        return owner
    if stored is not None:
        return line.tier or stored.tier, stored.project
    return line.tier or Tier.GLOBAL, None


def same_record(a: MemoryRecord, b: MemoryRecord) -> bool:
    """True if writing `a` over `b` would change nothing a person or a search sees
    (a vector re-made for the same text counts as the same)."""
    skip = {"embedding"}
    return a.model_dump(exclude=skip) == b.model_dump(exclude=skip) and (
        (a.embedding is None) == (b.embedding is None)
    )


class ImportSummary(ImportReport):
    """An import's report: of the imported lines, how many updated a memory already in
    the store and how many left one as it was (`imported` counts every good line)."""

    updated: int = 0
    unchanged: int = 0

    @property
    def new(self) -> int:
        return self.imported - self.updated - self.unchanged


NumberedLine = tuple[int, ImportLine]


def read_batches(
    lines: Iterable[str], report: ImportReport, size: int, project: str | None = None
) -> Iterator[tuple[list[NumberedLine], int]]:
    """The good lines with their numbers in batches of `size`, with the lines read for
    each batch; bad lines (an id repeated in one scope among them) and ignored fields go
    into `report`. `project` is the import's."""
    unknown: set[str] = set()
    first_line: dict[tuple[str | None, str], int] = {}  # (scope, id) -> its first line
    batch: list[NumberedLine] = []
    number = last = 0
    for number, line, problem in parse_lines(lines):
        if line is None:
            report.errors.append(problem or f"line {number}: unreadable")
            continue
        unknown.update(line.model_extra or {})
        identity = (line_scope(line, project), line.id or "")
        if line.id is not None and identity in first_line:
            # Which of two lines was meant is a guess: keep the first, name both.
            report.errors.append(
                f"line {number}: id {line.id} already appears on line {first_line[identity]}"
            )
            continue
        batch.append((number, line))
        if line.id is not None:
            first_line[identity] = number
        if len(batch) >= size:
            yield batch, number - last
            batch, last = [], number
    if batch or number > last:
        yield batch, number - last
    if unknown:
        report.warnings.append("ignored unknown fields: " + ", ".join(sorted(unknown)))
