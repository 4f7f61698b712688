"""Pydantic models of the task files and messages people and agents write.

Settings (hive.toml, a ROM's front matter) are in `hivemind.settings`.

Every field is optional (a plain Markdown file is valid). Unknown front-matter
keys are kept in `extra` (the reader warns about them) rather than refused.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_ID_LENGTH = 200


def check_file_id(value: str) -> str:
    """An id that names a file (`tasks/<id>.md`, `new/<id>.md`): no folders, not hidden."""
    if not value.strip():
        raise ValueError("id must not be empty")
    if "/" in value or "\\" in value or "\0" in value:
        raise ValueError(f"id must be a plain file name without '/' (got {value!r})")
    if value.startswith(".") or value.endswith("~"):
        raise ValueError(f"id must not start with '.' or end with '~' (got {value!r})")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"id must be at most {MAX_ID_LENGTH} characters (got {len(value)})")
    return value


class TaskPriority(StrEnum):
    CRITICAL = "critical"
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class TaskState(StrEnum):
    PENDING = "pending"
    ACTIVE = "active"
    DONE = "done"
    FAILED = "failed"
    REJECTED = "rejected"


class TaskLineage(BaseModel):
    """Where a delegated task comes from: its root task, its parent, how deep it is, and
    the agents that held its ancestors (in order), so delegation loops can be cut."""

    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    root: str
    parent: str
    depth: int = Field(default=1, ge=1)
    agents: list[str] = Field(default_factory=list)


class Task(BaseModel):
    """A task file: front matter + body (what to do)."""

    # `id: 42` or `depends_on: [7]` in YAML gives numbers; people mean names.
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    id: str
    title: str = ""
    assignee: str | None = None
    priority: TaskPriority = TaskPriority.MEDIUM
    project: str | None = None
    domain: str | None = None
    task_type: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    reply_to: str | None = None
    max_attempts: int = Field(default=3, ge=1)
    attempts: int = Field(default=0, ge=0)
    status: TaskState = TaskState.PENDING
    agent: str | None = None
    created_by: str | None = None
    lineage: TaskLineage | None = None
    created_at: datetime | None = None
    claimed_at: datetime | None = None
    finished_at: datetime | None = None
    # Set by `hivemind task retry`: its attempts, and its ceilings' counts (tokens,
    # rounds, idle turns), start again from then.
    retried_at: datetime | None = None
    # `<server>.<tool>` and its input: the offline provider calls that MCP tool for it.
    mcp: str | None = None
    mcp_args: dict[str, Any] | None = None
    body: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("depends_on", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, (str, int)) else value

    @field_validator("id")
    @classmethod
    def _id_names_a_file(cls, value: str) -> str:
        return check_file_id(value)


class Message(BaseModel):
    """A maildir message: front matter + body. `from` is set by the runtime."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, coerce_numbers_to_str=True)

    id: str
    from_: str = Field(default="unknown", alias="from")
    to: str
    subject: str = ""
    sent_at: datetime | None = None
    thread: str | None = None
    in_reply_to: str | None = None
    task: str | None = None
    body: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _id_names_a_file(cls, value: str) -> str:
        return check_file_id(value)


