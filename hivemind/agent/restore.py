"""A restarted agent takes up its tasks where it left them.

Working memory lives in the process; the audit log outlives it. For the tasks an
agent still holds, the steps it took (its tool calls and what it said, with their
results as the log kept them) come back as HISTORY blocks, the newest `limit` of them,
so after a restart the model does not start those tasks over blind. What comes back is
what a live agent would still hold: no step of a task that ended (even one taken up
again since), none older than the janitor lets history get, each with its own time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hivemind.agent.audit import AuditLog
from hivemind.agent.concerns import concerned_tasks
from hivemind.agent.toolrun import short
from hivemind.memory.blocks import HistoryBlock, Priority, utcnow
from hivemind.memory.earlier import fold
from hivemind.memory.janitor import HISTORY_MAX_AGE
from hivemind.memory.manager import WorkingMemoryManager


@dataclass
class _Step:
    """A step read back from the log, and the held tasks it is still filed under."""

    action: str
    detail: str
    result: str | None
    at: datetime
    cycle: Any
    task_ids: list[str]

    def block(self) -> HistoryBlock:
        """The step as the cycle recorded it in working memory, marked restored."""
        return HistoryBlock(
            action=self.action, detail=self.detail, result=self.result,
            priority=Priority.MEDIUM, timestamp=self.at,
            metadata={"task_ids": self.task_ids, "cycle": self.cycle, "restored": True},
        )


def _record_time(rec: Mapping[str, Any]) -> datetime | None:
    """When the record was written (UTC); None if its `at` is not a time."""
    try:
        at = datetime.fromisoformat(str(rec.get("at")))
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _record_steps(rec: Mapping[str, Any], at: datetime, held: set[str]) -> Iterator[_Step]:
    """The steps of one cycle record that concern a task of `held`, as the cycle filed
    them: each call under the tasks `concerned_tasks` finds among all the cycle's tasks
    (not only those still held: a call for a task that ended since must not fall back
    to "every task"), what the model said under all of them."""
    tasks = [t for t in rec.get("tasks") or [] if isinstance(t, str)]
    cycle = rec.get("cycle")
    for call in rec.get("tool_calls") or []:
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            continue
        given = call.get("input")
        args: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        ids = [t for t in concerned_tasks(args, tasks) if t in held]
        if ids:
            result = ("error: " if call.get("error") else "") + short(
                str(call.get("result", "")), 200)
            yield _Step(call["name"], short(given, 200), result, at, cycle, ids)
    text = rec.get("text")
    ids = [t for t in tasks if t in held]
    if isinstance(text, str) and text and ids:
        yield _Step("said", short(text, 500), None, at, cycle, ids)


def _ended(rec: Mapping[str, Any]) -> set[str]:
    """The tasks the cycle of `rec` completed or failed."""
    effects = rec.get("effects")
    if not isinstance(effects, Mapping):
        return set()
    return {t for key in ("tasks_completed", "tasks_failed")
            for t in effects.get(key) or [] if isinstance(t, str)}


def _newest(steps: list[_Step], limit: int) -> list[_Step]:
    """`steps` less those that can never be among the newest `limit` restored: a step
    whose every task has `limit` newer steps kept (an end that takes the task off those
    newer steps takes it off this one too)."""
    counts: dict[str, int] = {}
    kept: list[_Step] = []
    for step in reversed(steps):
        if any(counts.get(t, 0) < limit for t in step.task_ids):
            kept.append(step)
            for t in step.task_ids:
                counts[t] = counts.get(t, 0) + 1
    return kept[::-1]


def _steps(
    audit: AuditLog, held: set[str], since: datetime, limit: int
) -> tuple[list[HistoryBlock], list[HistoryBlock]]:
    """The steps still filed under a task of `held` that were taken after `since`,
    oldest first: the older ones (those a long log kept in memory) and the newest
    `limit`. As the live cycle does (`Agent._compact_history`), a
    task's steps go when a cycle completes or fails it, so a task failed, retried and
    taken again starts with none of its failed attempt's."""
    steps: list[_Step] = []
    bound = 4 * limit
    for rec in audit.records():
        if rec.get("event") != "cycle":
            continue
        at = _record_time(rec)
        if at is not None and at >= since:
            steps.extend(_record_steps(rec, at, held))
        ended = _ended(rec) & held
        if ended:
            for step in steps:
                step.task_ids = [t for t in step.task_ids if t not in ended]
            steps = [s for s in steps if s.task_ids]
        if len(steps) > bound:  # a long log: keep the memory bounded
            steps = _newest(steps, limit)
            bound = max(bound, 2 * len(steps))
    return [s.block() for s in steps[:-limit]], [s.block() for s in steps[-limit:]]


def restore_history(
    audit: AuditLog, held: Iterable[str], working: WorkingMemoryManager, limit: int,
    max_age: timedelta = HISTORY_MAX_AGE, now: datetime | None = None,
) -> int:
    """Add the newest `limit` steps taken for the tasks of `held` in the last `max_age`
    to `working`, each with the time of its record, and the older ones to its earlier
    steps, as the janitor would have left them; how many steps came back whole."""
    wanted = set(held)
    if not wanted or limit <= 0:
        return 0
    older, steps = _steps(audit, wanted, (now or utcnow()) - max_age, limit)
    fold(working, older)
    for block in steps:
        working.add(block)
    return len(steps)
