"""The steps an agent keeps in view: what it did and said for the tasks it holds.

A finished task's steps shrink to one line of the finished-tasks summary (the steps
that mattered were consolidated into long-term memory at its end; what it answered
stays in view); steps of a task taken away go too.
"""

from __future__ import annotations

from typing import Any

from hivemind.agent.toolrun import short
from hivemind.agent.view import FINISHED_ID, finished_block
from hivemind.memory.blocks import BlockType, HistoryBlock, Priority
from hivemind.memory.earlier import keep_tasks
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.tools.base import ToolContext


def keep_steps_of(working: WorkingMemoryManager, held: set[str]) -> None:
    """Steps for tasks the agent no longer holds go: ended now, or before beside one
    that ends only now (a step for t1 and t2 outlived both), or taken away."""
    for block in working.by_type(BlockType.HISTORY):
        ids = block.metadata.get("task_ids") or []
        if ids and held.isdisjoint(ids):
            working.remove(block.id)
    keep_tasks(working, held)


def note_said(working: WorkingMemoryManager, text: str, task_ids: list[str], cycle: int) -> None:
    """What the model said last in a cycle, tied to the tasks the cycle held: compacted
    with them when they end."""
    if text:
        working.add(HistoryBlock(action="said", detail=short(text, 500),
                                 priority=Priority.MEDIUM,
                                 metadata={"task_ids": task_ids, "cycle": cycle}))


def compact_history(
    working: WorkingMemoryManager, ctx: ToolContext, calls: list[dict[str, Any]]
) -> None:
    """After a cycle: the steps of the tasks it ended become lines of the finished-tasks
    summary, with complete_task's result or fail_task's reason."""
    fx = ctx.effects
    finished = {t: "done" for t in fx.tasks_completed} | {t: "failed" for t in fx.tasks_failed}
    keep_steps_of(working, set(ctx.active_tasks))
    if not finished:
        return
    said = {  # complete_task's result, fail_task's reason
        c["input"].get("task_id"): c["input"].get("result") or c["input"].get("reason")
        for c in calls if c["name"] in ("complete_task", "fail_task") and not c["error"]
    }
    working.add(finished_block(working.get(FINISHED_ID), finished, said))
