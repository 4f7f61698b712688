"""What the long-term store holds and what it answers: records, scored results, reports.

A `MemoryRecord` is one memory; `ScoredMemory` is a record as a retrieval ranked
it, with every term of the score so the audit log can show why it was chosen.
"""

from __future__ import annotations

import unicodedata
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hivemind.ltm.scopes import MemoryRef, scope_key

MAX_CONTENT_CHARS = 4_000
"""The longest memory a person may add or import, the same cap as the agents' `remember`
tool: a longer one would rank like any other yet never fit an agent's context."""

# Drawn as nothing though not whitespace: fillers, invisible marks, variation selectors.
_BLANK_MARKS = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0"
    + "".join(map(chr, range(0xFE00, 0xFE10)))
    + "".join(map(chr, range(0xE0100, 0xE01F0)))
)


def is_blank(text: str) -> bool:
    """True if `text` shows nothing: only whitespace, control and format characters
    (zero-width spaces and joiners, BOMs, direction marks) or invisible fillers."""
    return all(
        c.isspace() or c in _BLANK_MARKS or unicodedata.category(c) in ("Cf", "Cc") for c in text
    )


def utcnow() -> datetime:
    """Timezone-aware now (UTC)."""
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """`moment` with a timezone; a naive datetime is taken as UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def new_memory_id() -> str:
    """A fresh memory id (`m-` + 16 hex digits)."""
    return f"m-{uuid.uuid4().hex[:16]}"


class MemoryKind(StrEnum):
    EPISODIC = "episodic"
    """An observation: something that happened or was said."""
    SEMANTIC = "semantic"
    """A reflection: an insight drawn from other memories (`source_ids`)."""


class Tier(StrEnum):
    TASK = "task"
    """Lives until its task ends; what matters is then promoted."""
    PROJECT = "project"
    """Shared by every task of one project, invisible to other projects."""
    GLOBAL = "global"
    """Visible everywhere; preferences need a person's approval."""


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    PROPOSED = "proposed"
    """A global preference waiting for `hivemind memory approve ID`; never retrieved."""


class ImportanceSource(StrEnum):
    """How a memory's importance was set."""

    HEURISTIC = "heuristic"
    """Estimated from the text on the way in; waits for the agent's model to rate it."""
    MODEL = "model"
    """Rated by the writing agent's model (`hivemind.ltm.rating`)."""
    GIVEN = "given"
    """Stated by whoever wrote it: a person, an agent's `remember`, an import line."""


class MemoryRecord(BaseModel):
    """One memory, as stored."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(default_factory=new_memory_id, min_length=1, max_length=200)
    key: str
    content: str = Field(min_length=1)
    kind: MemoryKind = MemoryKind.EPISODIC
    tier: Tier = Tier.GLOBAL
    project: str | None = None
    agent: str | None = None
    task_id: str | None = None
    domain: str | None = None
    task_type: str | None = None
    tags: list[str] = Field(default_factory=list)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    importance_by: ImportanceSource | None = None
    """How `importance` was set (None: in a store from before this was kept)."""
    created_at: datetime = Field(default_factory=utcnow)
    last_accessed: datetime = Field(default_factory=utcnow)
    access_count: int = Field(default=0, ge=0)
    source_ids: list[str] = Field(default_factory=list)
    embedding_model: str | None = None
    embedding: list[float] | None = None
    status: MemoryStatus = MemoryStatus.ACTIVE
    preference: bool = False
    goal_values: dict[str, float] = Field(default_factory=dict)
    """Learned value per goal (`domain/task_type`), 0..1, from TD(λ)."""

    @property
    def scope(self) -> str:
        """The task, project or global scope it belongs to (see `hivemind.ltm.scopes`)."""
        return scope_key(self.tier, self.project, self.task_id if self.tier is Tier.TASK else None)

    @property
    def ref(self) -> MemoryRef:
        """(scope, id): its identity."""
        return (self.scope, self.id)

    @field_validator("created_at", "last_accessed")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return as_utc(value)

    @model_validator(mode="after")
    def _tier_has_its_owner(self) -> MemoryRecord:
        if self.tier is Tier.PROJECT and not self.project:
            raise ValueError("a project memory needs `project`")
        if self.tier is Tier.TASK and not self.task_id:
            raise ValueError("a task memory needs `task_id`")
        if (self.embedding is None) != (self.embedding_model is None):
            raise ValueError("`embedding` and `embedding_model` go together")
        return self


class ScoredMemory(BaseModel):
    """A retrieved memory with its score and each (normalised, unweighted) term."""

    model_config = ConfigDict(frozen=True)

    record: MemoryRecord
    score: float
    relevance: float
    recency: float
    importance: float
    value: float = 0.0
    bm25: float = 0.0
    """The raw BM25 score (higher = better), before normalisation."""
    similarity: float | None = None
    """Cosine similarity to the query, when embeddings were used."""

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def ref(self) -> MemoryRef:
        return self.record.ref

    @property
    def content(self) -> str:
        return self.record.content

    def terms(self) -> dict[str, Any]:
        """id, score and every term, rounded for people and logs."""
        out: dict[str, Any] = {
            "id": self.record.id,
            "score": round(self.score, 6),
            "relevance": round(self.relevance, 6),
            "recency": round(self.recency, 6),
            "importance": round(self.importance, 6),
            "value": round(self.value, 6),
            "bm25": round(self.bm25, 6),
        }
        if self.similarity is not None:
            out["similarity"] = round(self.similarity, 6)
        return out


def recall_audit(query: str, results: list[ScoredMemory], **context: Any) -> dict[str, Any]:
    """What the audit log keeps of one retrieval: the query, the ids and their scores."""
    return {"query": query, **context, "results": [r.terms() for r in results]}


class TaskEndReport(BaseModel):
    """What `end_task` did, id by id, for the audit log."""

    task_id: str
    success: bool
    goal: str | None = None
    consolidated: list[str] = Field(default_factory=list)
    """Ids of episodic memories made from HISTORY blocks."""
    promoted: list[str] = Field(default_factory=list)
    """Ids of task memories moved up to the project (or global) tier."""
    cleared: list[str] = Field(default_factory=list)
    """Ids of task memories deleted with the task."""
    value_updates: dict[str, tuple[float, float]] = Field(default_factory=dict)
    """memory id → (old value, new value) for the goal."""
    pruned: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)
    """Why history was not consolidated, or task memories not promoted: the scope was
    full with nothing it may evict."""


class ImportReport(BaseModel):
    """The outcome of a JSONL import: what went in, which lines were refused and why."""

    imported: int = 0
    errors: list[str] = Field(default_factory=list)
    """One line per refused input line, `line N: problem`."""
    warnings: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    evicted: int = 0

    @property
    def lines_per_second(self) -> float:
        return self.imported / self.seconds if self.seconds > 0 else float("inf")


def summary(records: list[MemoryRecord]) -> dict[str, Any]:
    """Counts by tier, kind, status and project, oldest/newest, how many carry a vector."""
    out: dict[str, Any] = {"total": len(records)}
    for name in ("tier", "kind", "status"):
        counts: dict[str, int] = {}
        for r in records:
            value = getattr(r, name).value
            counts[value] = counts.get(value, 0) + 1
        out[f"by_{name}"] = counts
    projects: dict[str, int] = {}
    for r in records:
        if r.project:
            projects[r.project] = projects.get(r.project, 0) + 1
    out["by_project"] = projects
    times = [r.created_at for r in records]
    out["oldest"] = min(times).isoformat() if times else None
    out["newest"] = max(times).isoformat() if times else None
    out["embedded"] = sum(1 for r in records if r.embedding is not None)
    return out
