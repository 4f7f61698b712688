"""Long-term memory tools: remember, recall; and what a task's end does to memory.

Every retrieval (query, ids, scores) and every write or consolidation goes into
the cycle's effects, and so into its audit record.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, Field

from hivemind.errors import ToolError
from hivemind.hive.tasks.ref import TaskRef
from hivemind.ltm.goals import Goal, task_goal
from hivemind.ltm.records import MAX_CONTENT_CHARS, recall_audit
from hivemind.memory.blocks import BlockType, HistoryBlock
from hivemind.tools.base import Footprint, Tool, ToolContext


class RememberInput(BaseModel):
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    importance: float | None = Field(
        default=None, ge=0.0, le=1.0, description="0 trivial to 1 essential"
    )
    scope: Literal["task", "project", "global"] = Field(
        default="project",
        description="global (so project with no project) waits for a person's OK")
    preference: bool = Field(
        default=False, description="a lasting preference"
    )


class RecallInput(BaseModel):
    query: str = Field(min_length=1, max_length=1_000)
    k: int = Field(default=5, ge=1, le=20)
    domain: str | None = Field(
        default=None, max_length=200, description="only memories of this domain")
    task_type: str | None = Field(
        default=None, max_length=200, description="only memories of this task type")


def _goal(ctx: ToolContext, ref: TaskRef | None) -> Goal:
    """The task's domain and kind: its front matter's, else inferred (`ltm.goals`)."""
    return task_goal(ref.task, ctx.config.skills) if ref is not None else Goal()


async def remember(ctx: ToolContext, args: RememberInput) -> str:
    if ctx.ltm is None:
        raise ToolError("long-term memory is not available in this hive")
    ref = ctx.current_task()
    if args.scope == "task" and ref is None:
        raise ToolError("scope 'task' needs an active task; use 'project' or 'global'")
    project = ref.task.project if ref else None
    goal = _goal(ctx, ref)
    if args.scope == "project" and project is None:
        scope: Literal["task", "project", "global"] = "global"
    else:
        scope = args.scope
    record = await asyncio.to_thread(
        ctx.ltm.remember, args.content, agent=ctx.agent, scope=scope, project=project,
        task_id=ref.task.id if ref else None, importance=args.importance,
        domain=goal.domain, task_type=goal.task_type, preference=args.preference,
        # Work of no project reaches every project: it waits for a person (seed 002).
        needs_approval=True if project is None else None,
    )
    ctx.effects.memories.append(
        {"op": "remember", "id": record.id, "tier": record.tier.value,
         "status": record.status.value, "importance": record.importance}
    )
    if record.status.value == "proposed":
        return (f"proposed {record.id}: a person must approve it (hivemind memory approve "
                f"{record.id}) or decline it (hivemind memory forget {record.id})")
    return f"remembered {record.id} ({record.tier.value})"


async def recall(ctx: ToolContext, args: RecallInput) -> str:
    if ctx.ltm is None:
        raise ToolError("long-term memory is not available in this hive")
    ref = ctx.current_task()
    found = await asyncio.to_thread(
        ctx.ltm.recall, args.query, agent=ctx.agent, project=ref.task.project if ref else None,
        task_id=ref.task.id if ref else None, k=args.k, goal=_goal(ctx, ref).key,
        weights=ctx.config.retrieval, domain=args.domain, task_type=args.task_type,
    )
    ctx.effects.memories.append({"op": "recall", **recall_audit(args.query, found)})
    if not found:
        return "nothing found"
    return "\n".join(f"[{m.id}] ({m.score:.2f}) {m.content}" for m in found)


_MEMORY_ACTIONS = frozenset({"remember", "recall"})


def end_task_memory(ctx: ToolContext, ref: TaskRef, success: bool) -> dict[str, Any] | None:
    """Consolidate the task's history, learn from its outcome, clear its task memory."""
    if ctx.ltm is None:
        return None
    task_id = ref.task.id
    history = [  # working memory keeps its blocks indexed by type
        b for b in ctx.working.by_type(BlockType.HISTORY)
        if isinstance(b, HistoryBlock) and task_id in b.metadata.get("task_ids", ())
        # What remember stored (or only proposed: a global preference waits for a
        # person) and what recall found are not kept again as history: a proposal
        # would reach every agent unapproved.
        and b.action not in _MEMORY_ACTIONS
    ]
    report = ctx.ltm.end_task(
        task_id, success=success, goal=_goal(ctx, ref).key, history=history,
        project=ref.task.project, agent=ctx.agent,
    )
    entry = {"op": "end_task", **report.model_dump()}
    ctx.effects.memories.append(entry)
    return entry


MEMORY_TOOLS: list[Tool[Any]] = [
    Tool(
        "remember",
        "Store a fact, decision or lesson in long-term memory.",
        RememberInput,
        remember,
        # It reads memory too: an equal memory is updated, not stored twice.
        touches=Footprint.of(reads=["tasks", "memory"], writes=["memory"]),
    ),
    Tool(
        "recall",
        "Search long-term memory; best matches first, with scores.",
        RecallInput,
        recall,
        touches=Footprint.of(reads=["tasks", "memory"]),
    ),
]
