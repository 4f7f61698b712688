"""Task tools: create_task (delegate), complete_task, fail_task, wait_for.

An agent can only complete, fail or wait on a task it holds (in tasks/active/<agent>/).
A delegated task carries its lineage; loops past the default limits are refused.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from hivemind.errors import ToolError
from hivemind.fs.steps import run_async
from hivemind.hive.layout import HUMAN
from hivemind.hive.models import Task, TaskPriority, check_file_id
from hivemind.hive.tasks.ref import TaskRef
from hivemind.tools.base import Footprint, Tool, ToolContext
from hivemind.tools.limits import child_lineage, delegation_refusal
from hivemind.tools.memory import end_task_memory
from hivemind.tools.taskedits import check_as_seen


class CreateTaskInput(BaseModel):
    title: str = Field(min_length=1, max_length=200)
    body: str = Field(default="", max_length=100_000)
    assignee: str | None = Field(default=None, description="Agent (default: routed)")
    priority: TaskPriority = TaskPriority.MEDIUM
    depends_on: list[str] = Field(default_factory=list, description="Task ids to finish first")
    project: str | None = None
    domain: str | None = None
    task_type: str | None = None
    task: str | None = Field(default=None, description="Your task this is part of")


class CompleteTaskInput(BaseModel):
    task_id: str
    result: str = Field(min_length=1, max_length=100_000)


class FailTaskInput(BaseModel):
    task_id: str
    reason: str = Field(min_length=1, max_length=2_000)


class WaitForInput(BaseModel):
    task_id: str
    waiting_for: str = Field(min_length=1, max_length=500)


def _held(ctx: ToolContext, task_id: str) -> TaskRef:
    ref = ctx.active_tasks.get(task_id)
    if ref is None:
        held = ", ".join(ctx.active_tasks) or "none"
        raise ToolError(f"you do not hold task {task_id!r}; your active tasks: {held}")
    return ref


async def create_task(ctx: ToolContext, args: CreateTaskInput) -> str:
    agents = ctx.hive.agent_names()
    if args.assignee is not None and args.assignee not in agents:
        raise ToolError(f"no agent {args.assignee!r}; agents: {', '.join(agents)}")
    parent = ctx.active_tasks.get(args.task or "") or ctx.current_task()
    lineage = child_lineage(parent.task, ctx.agent) if parent is not None else None
    if lineage is not None:
        refusal = delegation_refusal(ctx.config, lineage, args.assignee)
        if refusal is not None:
            raise ctx.refuse(refusal)
    task_id = ctx.board.new_task_id(args.title)
    deps = _dependencies(ctx, task_id, args.depends_on)
    task = Task(
        id=task_id,
        title=args.title,
        body=args.body,
        assignee=args.assignee,
        priority=args.priority,
        depends_on=deps,
        project=args.project or (parent.task.project if parent else None),
        domain=args.domain,
        task_type=args.task_type,
        reply_to=ctx.agent,
        lineage=lineage,
    )
    ref = await run_async(ctx.board.create_steps(task, created_by=ctx.agent))
    ctx.effects.tasks_created.append(ref.task.id)
    if parent is not None:
        ctx.effects.delegated[ref.task.id] = parent.task.id
    if ctx.on_task_change is not None:
        ctx.on_task_change()
    out = f"created task {ref.task.id} ({ctx.hive.relative(ref.path)})"
    missing = [d for d in deps if ctx.board.find(d) is None]
    if missing:
        out += (f"; it waits until {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
                "done, and no such task is on the board yet (create it, or fix the id)")
    return out


MAX_DEPENDENCY_DEPTH = 50


def _dependencies(ctx: ToolContext, task_id: str, given: list[str]) -> list[str]:
    """`given` checked: ids that name files, not the task itself, no cycle through the
    tasks on the board (a task in one would never be claimable)."""
    deps = list(dict.fromkeys(d.strip() for d in given))
    for dep in deps:
        try:
            check_file_id(dep)
        except ValueError as exc:
            raise ToolError(f"depends_on: {exc}") from None
    if task_id in deps:
        raise ToolError(f"task {task_id} cannot depend on itself")
    seen, frontier = set(deps), deps
    for _ in range(MAX_DEPENDENCY_DEPTH):
        later = []
        for dep in frontier:
            ref = ctx.board.find(dep)
            for further in ref.task.depends_on if ref is not None else ():
                if further == task_id:
                    raise ToolError(f"depends_on {dep}, which waits for {task_id} itself: "
                                    "neither could ever start")
                if further not in seen:
                    seen.add(further)
                    later.append(further)
        if not later:
            break
        frontier = later
    return deps


async def _finish(
    ctx: ToolContext, task_id: str, text: str, success: bool, notice: list[Path]
) -> TaskRef:
    """Move the task, then consolidate its memory. A move that fails (a full disk) takes
    back its `notice` still unread: nobody is told of an end that did not happen."""
    ref, board = ctx.active_tasks[task_id], ctx.board
    steps = board.complete_steps if success else board.fail_steps
    try:
        after = await run_async(steps(ref, text, ctx.agent))
    except BaseException:
        for path in notice:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)  # in new/ still: unread; a read one stays
        raise
    del ctx.active_tasks[task_id]
    (ctx.effects.tasks_completed if success else ctx.effects.tasks_failed).append(task_id)
    end_task_memory(ctx, ref, success)
    return after


async def complete_task(ctx: ToolContext, args: CompleteTaskInput) -> str:
    ref = _held(ctx, args.task_id)
    ctx.board.check_held(ref, ctx.agent)  # no notice for a task that will not end
    ref = await check_as_seen(ctx, ref)
    notice = await _notify(ctx, ref, "done", args.result)
    done = await _finish(ctx, args.task_id, args.result, True, notice)
    return f"task {args.task_id} is done ({ctx.hive.relative(done.path)})"


async def fail_task(ctx: ToolContext, args: FailTaskInput) -> str:
    ref = _held(ctx, args.task_id)
    ctx.board.check_held(ref, ctx.agent)
    ref = await check_as_seen(ctx, ref)
    notice = await _notify(ctx, ref, "failed", args.reason)
    after = await _finish(ctx, args.task_id, args.reason, False, notice)
    return f"task {args.task_id} failed; now {after.state.value}"


async def wait_for(ctx: ToolContext, args: WaitForInput) -> str:
    ref = _held(ctx, args.task_id)
    ctx.effects.waits[ref.task.id] = args.waiting_for
    return (f"task {ref.task.id} waits for: {args.waiting_for}; you are woken when new mail "
            "or a task change comes")


def notice_id(ref: TaskRef, outcome: str) -> str:
    """The id of the notice that a claimed task ended: the same on every retry."""
    t = ref.task
    key = f"{t.id}\0{t.attempts}\0{outcome}"  # one claim per attempt
    return f"{outcome}-{hashlib.sha256(key.encode()).hexdigest()[:24]}"


async def _notify(ctx: ToolContext, ref: TaskRef, outcome: str, text: str) -> list[Path]:
    """Tell whoever asked for the task (reply_to, else its creator) how it ended.

    Sent before the task moves, under an id fixed by the claim: a crash between the
    two steps makes the next cycle send the same id again, which the maildir drops.
    """
    to = ref.task.reply_to or ref.task.created_by
    if not to or to == ctx.agent:
        return []  # a file dropped by hand: its outcome is in tasks/done/ or tasks/failed/
    if to != HUMAN and not ctx.hive.is_agent(to):
        # A reply_to misspelt, or an agent removed since: the task must still end, and
        # its outcome reach someone.
        text = f"(Task {ref.task.id} asked to tell {to!r}, which is no agent of this hive.)" \
            f"\n\n{text}"
        to = HUMAN
    title = ref.task.title or ref.task.id
    delivered = await run_async(ctx.post.send_steps(
        ctx.agent, to, f"[{outcome}] {title}", text, task=ref.task.id,
        id=notice_id(ref, outcome),
    ))
    if ctx.on_mail is not None:
        ctx.on_mail([to])
    if ctx.on_task_change is not None:
        ctx.on_task_change()
    return delivered


def _finishing(tool_input: dict[str, Any]) -> Footprint:
    """complete_task / fail_task: this task, the notice, the board, its memory."""
    task = f"task:{tool_input.get('task_id')}"
    return Footprint.of(reads=[task], writes=[task, "tasks", "mail", "memory"])


TASK_TOOLS: list[Tool[Any]] = [
    Tool(
        "create_task",
        "Delegate a task; its outcome comes back to you by mail.",
        CreateTaskInput,
        create_task,
        # Reads the held tasks (the parent's project) and the board (a free id).
        touches=Footprint.of(reads=["tasks"], writes=["tasks"]),
    ),
    Tool(
        "complete_task",
        "Finish a task you hold, with its result.",
        CompleteTaskInput,
        complete_task,
        touches=_finishing,
    ),
    Tool(
        "fail_task",
        "Give up a task you hold, saying why; it is retried or fails.",
        FailTaskInput,
        fail_task,
        touches=_finishing,
    ),
    Tool(
        "wait_for",
        "Say what a task you hold waits for, and end your turn.",
        WaitForInput,
        wait_for,
        touches=Footprint.of(reads=["tasks"]),
    ),
]
