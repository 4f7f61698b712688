"""A task and where it is on the board; its id from a title, its body's sections."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from hivemind.hive.models import Task, TaskPriority, TaskState

_RANK = {p: i for i, p in enumerate(TaskPriority)}  # critical first


@dataclass
class TaskRef:
    """A task and where it is on the board."""

    task: Task
    path: Path
    state: TaskState
    agent: str | None = None
    mtime: float = 0.0

    @property
    def id(self) -> str:
        return self.task.id

    def age_key(self) -> tuple[int, float, str]:
        """Sort key: sub-tasks first (tasks waiting on them hold their agents), then
        priority, then creation time (else file time), then name."""
        created = self.task.created_at
        when = as_utc(created).timestamp() if created is not None else self.mtime
        rank = _RANK[self.task.priority] - (len(_RANK) if self.task.lineage else 0)
        return rank, when, self.path.name


def _slug_char(c: str) -> str:
    # Letters and digits of any script, and the marks that shape them (Devanagari vowel
    # signs); everything else, `_`, `.` and `/` included, separates words.
    return c if c.isalnum() or unicodedata.category(c).startswith("M") else "-"


def slugify(title: str) -> str:
    """`Fix the login bug!` -> `fix-the-login-bug`, `Überprüfung` -> `überprüfung`
    (at most 60 characters and 180 UTF-8 bytes, so the name fits any file system)."""
    text = unicodedata.normalize("NFC", title).lower()
    slug = re.sub("-+", "-", "".join(map(_slug_char, text))).strip("-")[:60]
    while len(slug.encode("utf-8")) > 180:
        slug = slug[:-1]
    return slug.rstrip("-") or "task"


def append_section(body: str, heading: str, text: str) -> str:
    base = body.rstrip("\n")
    section = f"## {heading}\n\n{text.strip()}"
    return f"{base}\n\n{section}" if base else section


def as_utc(moment: datetime) -> datetime:
    """A naive time read from a file is taken as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
