"""A restarted agent takes up its tasks where it left them.

Working memory lives in the process; the audit log outlives it. For the tasks an
agent still holds, the steps it took (its tool calls and what it said, with their
results as the log kept them) come back as HISTORY blocks, the newest `limit` of them,
so after a restart the model does not start those tasks over blind. What comes back is
what a live agent would still hold: no step of a task that ended (even one taken up
again since), the newest of the last hour whole, each with its own time, the others
as the janitor leaves them: earlier-steps lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hivemind.agent.audit import AuditLog
from hivemind.agent.concerns import concerned_tasks
from hivemind.agent.record import CycleRecord
from hivemind.agent.toolrun import short, step_result
from hivemind.clock import utcnow
from hivemind.memory.blocks import HistoryBlock, Priority
from hivemind.memory.earlier import FIRST_KEPT, LINES_KEPT, add_skipped, fold
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


def _record_steps(rec: CycleRecord, at: datetime, held: set[str]) -> Iterator[_Step]:
    """The steps of one cycle record that concern a task of `held`, as the cycle filed
    them: each call under the tasks `concerned_tasks` finds among all the cycle's tasks
    (not only those still held: a call for a task that ended since must not fall back
    to "every task"), what the model said under all of them."""
    for call in rec.tool_calls:
        if call.name is None:
            continue
        args: Mapping[str, Any] = call.input if isinstance(call.input, Mapping) else {}
        ids = [t for t in concerned_tasks(args, rec.tasks) if t in held]
        if ids:
            result = step_result(call.name, str(call.result if call.result is not None
                                                else ""), bool(call.error))
            yield _Step(call.name, short(call.input, 200), result, at, rec.cycle, ids)
    ids = [t for t in rec.tasks if t in held]
    if rec.text and ids:
        yield _Step("said", short(rec.text, 500), None, at, rec.cycle, ids)


def _trim(steps: list[_Step], keep_newest: int, dropped: dict[tuple[str, ...], int]) -> list[_Step]:
    """`steps` less those neither among the first FIRST_KEPT nor the newest
    `keep_newest` of any of their tasks (what a live agent would still show, whole or
    as an earlier-steps line); those left out are counted in `dropped`, per tasks."""
    keep = [False] * len(steps)
    newer: dict[str, int] = {}
    for i in range(len(steps) - 1, -1, -1):
        ids = steps[i].task_ids
        if any(newer.get(t, 0) < keep_newest for t in ids):
            keep[i] = True
        for t in ids:
            newer[t] = newer.get(t, 0) + 1
    older: dict[str, int] = {}
    for i, step in enumerate(steps):
        if any(older.get(t, 0) < FIRST_KEPT for t in step.task_ids):
            keep[i] = True
        for t in step.task_ids:
            older[t] = older.get(t, 0) + 1
        if not keep[i]:
            key = tuple(step.task_ids)
            dropped[key] = dropped.get(key, 0) + 1
    return [step for step, k in zip(steps, keep, strict=True) if k]


def _steps(
    audit: AuditLog, held: set[str], limit: int
) -> tuple[list[_Step], dict[tuple[str, ...], int]]:
    """The steps still filed under a task of `held`, oldest first (a long log: the
    first and the newest of each task), and how many were left out between, per
    tasks. As the live cycle does (`history.compact_history`), a task's steps go when a
    cycle completes or fails it, so a task failed, retried and taken again starts with
    none of its failed attempt's."""
    steps: list[_Step] = []
    dropped: dict[tuple[str, ...], int] = {}
    keep_newest = limit + LINES_KEPT
    bound = 4 * keep_newest
    for rec in audit.records():
        if not isinstance(rec, CycleRecord):
            continue
        at = rec.time
        if at is not None:
            steps.extend(_record_steps(rec, at, held))
        ended = rec.ended_tasks & held
        if ended:
            for step in steps:
                step.task_ids = [t for t in step.task_ids if t not in ended]
            steps = [s for s in steps if s.task_ids]
            for key in [k for k in dropped if not ended.isdisjoint(k)]:
                n, rest = dropped.pop(key), tuple(t for t in key if t not in ended)
                if rest:
                    dropped[rest] = dropped.get(rest, 0) + n
        if len(steps) > bound:  # a long log: keep the memory bounded
            steps = _trim(steps, keep_newest, dropped)
            bound = max(bound, 2 * len(steps))
    return steps, dropped


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
    since = (now or utcnow()) - max_age
    steps, dropped = _steps(audit, wanted, limit)
    recent = {id(s) for s in [s for s in steps if s.at >= since][-limit:]}
    groups: dict[tuple[str, ...], list[_Step]] = {}
    for step in steps:
        if id(step) not in recent:
            groups.setdefault(tuple(step.task_ids), []).append(step)
    for key in dropped.keys() - groups.keys():
        groups[key] = []
    for key, older in groups.items():  # each task's first lines, the count, the newest
        fold(working, [s.block() for s in older[:FIRST_KEPT]])
        add_skipped(working, key, dropped.get(key, 0))
        fold(working, [s.block() for s in older[FIRST_KEPT:]])
    blocks = [s.block() for s in steps if id(s) in recent]
    for block in blocks:
        working.add(block)
    return len(blocks)
