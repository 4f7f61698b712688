"""A restarted agent takes up its tasks where it left them.

Working memory lives in the process; the audit log outlives it. For the tasks an
agent still holds, the steps it took (its tool calls and what it said, with their
results as the log kept them) come back as HISTORY blocks, the newest `limit` of them,
so after a restart the model does not start those tasks over blind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hivemind.agent.audit import AuditLog
from hivemind.agent.concerns import concerned_tasks
from hivemind.agent.toolrun import short
from hivemind.memory.blocks import HistoryBlock, Priority
from hivemind.memory.manager import WorkingMemoryManager


def _steps(audit: AuditLog, held: set[str]) -> Iterable[HistoryBlock]:
    """The steps of the cycles that worked on a task of `held`, oldest first."""
    for rec in audit.records():
        if rec.get("event") != "cycle":
            continue
        tasks = [t for t in rec.get("tasks") or [] if isinstance(t, str) and t in held]
        if not tasks:
            continue
        meta: dict[str, Any] = {"cycle": rec.get("cycle"), "restored": True}
        for call in rec.get("tool_calls") or []:
            if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
                continue
            given = call.get("input")
            args: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
            result = str(call.get("result", ""))
            yield HistoryBlock(
                action=call["name"],
                detail=short(given, 200),
                result=("error: " if call.get("error") else "") + short(result, 200),
                priority=Priority.MEDIUM,
                metadata={**meta, "task_ids": concerned_tasks(args, tasks)},
            )
        text = rec.get("text")
        if isinstance(text, str) and text:
            yield HistoryBlock(action="said", detail=short(text, 500), priority=Priority.MEDIUM,
                               metadata={**meta, "task_ids": tasks})


def restore_history(
    audit: AuditLog, held: Iterable[str], working: WorkingMemoryManager, limit: int
) -> int:
    """Add the newest `limit` steps taken for the tasks of `held` to `working`; how many."""
    wanted = set(held)
    if not wanted or limit <= 0:
        return 0
    steps: list[HistoryBlock] = []
    for block in _steps(audit, wanted):
        steps.append(block)
        if len(steps) > 2 * limit:
            del steps[:-limit]  # a long log: keep the memory bounded
    for block in steps[-limit:]:
        working.add(block)
    return len(steps[-limit:])
