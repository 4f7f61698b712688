"""A task's cycles, from every agent's audit log: who worked on it, when, and what for."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from hivemind.agent.audit import parse_record
from hivemind.agent.auditfile import LineReader
from hivemind.agent.record import AnyRecord, CycleRecord, Interrupted
from hivemind.hive.layout import Hive

SAID_CHARS = 160
"""What the model said in a cycle, cut to this many characters (one line)."""


class TaskCycle(BaseModel):
    """One cycle an agent ran while it held the task (or that ended or made it)."""

    at: str
    agent: str
    cycle: int | None = None
    calls: list[str] = []  # the tool calls that named the task, by name
    tokens: int = 0
    outcome: str = ""  # done, failed, created, interrupted, or "" (worked on it)
    said: str = ""
    error: str = ""


def task_cycles(hive: Hive, task_id: str) -> list[TaskCycle]:
    """Every audit record about `task_id`, oldest first (each log read from its tail)."""
    found: list[TaskCycle] = []
    for path in _audit_files(hive):
        agent = path.name.removesuffix(".jsonl")
        for rec in _records(path):
            item = _about(rec, agent, task_id)
            if item is not None:
                found.append(item)
    return sorted(found, key=lambda c: c.at)


def _audit_files(hive: Hive) -> list[Path]:
    try:
        entries = list(os.scandir(hive.audit_dir))
    except OSError:
        return []
    return sorted(Path(e.path) for e in entries
                  if e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False))


def _records(path: Path) -> Iterator[AnyRecord]:
    try:  # never through a link, never blocked by a FIFO
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        reader = LineReader.at_tail(fh, size)
        for line in reader.lines(fh, size):
            rec = parse_record(line)
            if rec is not None:
                yield rec


def _about(rec: AnyRecord, agent: str, task_id: str) -> TaskCycle | None:
    """The record as a line of the task's history, or None if it is not about it."""
    if isinstance(rec, Interrupted):
        if task_id not in rec.tasks:
            return None
        return TaskCycle(at=str(rec.at or rec.started_at or ""), agent=agent, cycle=rec.cycle,
                         outcome="interrupted")
    if not isinstance(rec, CycleRecord):
        return None
    fx = rec.effects
    outcome = next((word for ids, word in ((fx.tasks_completed, "done"),
                                           (fx.tasks_failed, "failed"),
                                           (fx.tasks_created, "created"))
                    if task_id in ids), "")
    if task_id not in rec.tasks and not outcome:
        return None
    calls = [str(c.name) for c in rec.tool_calls if _names(c.input, task_id)]
    usage = rec.usage
    said = " ".join(rec.text.split())
    return TaskCycle(
        at=str(rec.at or ""), agent=agent, cycle=rec.cycle, calls=calls,
        tokens=usage.total_input + usage.output_tokens, outcome=outcome,
        said=said[:SAID_CHARS] + ("…" if len(said) > SAID_CHARS else ""),
        error=rec.error or "",
    )


def _names(given: Any, task_id: str) -> bool:
    """True if a tool call's input names the task (`task_id`, `task`, or in a path)."""
    if not isinstance(given, dict):
        return False
    if task_id in (given.get("task_id"), given.get("task")):
        return True
    return any(isinstance(v, str) and task_id in v for k, v in given.items()
               if k in ("path", "subject"))
