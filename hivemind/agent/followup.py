"""Held work after a turn: follow-ups, idle turns and per-task ceilings (DESIGN §6).

A turn that ends while the agent holds a task that waits on nothing (no open sub-task
it delegated for it, no unanswered question it sent about it, no `wait_for`) is
followed by another cycle at once, with a note naming those tasks. Turns with no
progress (no tool call not made before, the loop breaker's rule) count; past
`max_idle_turns` the task fails. Rounds and tokens per task have ceilings too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hivemind.agent.audit import at_or_after
from hivemind.agent.concerns import concerned_tasks
from hivemind.agent.record import AuditRecord, CycleRecord, TrackRecord
from hivemind.agent.services import HiveServices
from hivemind.errors import UserError
from hivemind.hive.layout import HUMAN
from hivemind.hive.mailbox import Mailbox, MailItem
from hivemind.hive.models import TaskState
from hivemind.hive.tasks.ref import TaskRef
from hivemind.llm.base import ModelResponse, ToolResult
from hivemind.memory.blocks import ContextBlock, Priority
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools.base import ToolContext
from hivemind.tools.limits import Conversations, thread_key
from hivemind.tools.memory import end_task_memory

FOLLOWUP_ID = "context:followup"
SAID_CHARS = 1_000  # of the model's last text, in a failed task's reason
_ENDED = (TaskState.DONE, TaskState.FAILED, TaskState.REJECTED)
LAST_TASK_ENDED = "last task ended"  # why a turn ended with no closing model call


@dataclass
class TaskTrack:
    """What the agent knows of one task it holds, across its cycles."""

    attempt: int = 0  # the claim it is for (Task.attempts)
    idle: int = 0  # turns in a row that ended with no progress while it waited on nothing
    rounds: int = 0  # model calls while held
    waits: str | None = None  # what the model said it waits for (`wait_for`)
    asked: set[str] = field(default_factory=set)  # agents asked about it, not answered
    children: set[str] = field(default_factory=set)  # tasks delegated for it


@dataclass
class TurnEnd:
    """How a cycle ended, as the follow-up needs it."""

    rounds: int
    progressed: set[str]  # held tasks with a new tool call this cycle
    text: str  # what the model said last
    calls: list[dict[str, Any]]
    tokens: dict[str, int]  # per task, all cycles


class HeldWork:
    """One agent's held tasks between turns: which get a follow-up, which must end."""

    def __init__(self) -> None:
        self.tracks: dict[str, TaskTrack] = {}
        self.pending: list[str] = []  # tasks the next cycle is a follow-up for
        self.turn = 0  # a new follow-up is a new input key
        self.conversations = Conversations()
        self.mirrored: dict[str, Any] | None = None  # status of an agent a worker runs
        self.shown_mail: set[str] = set()  # ids of the mail the cycle's model is shown

    def status(self) -> dict[str, Any]:
        """What status.json shows: what held tasks wait for, the latest refusals."""
        if self.mirrored is not None:
            return self.mirrored
        return {"waiting": self.waiting(), "refused": list(self.conversations.recent)}

    def hear(self, unread: list[MailItem], new: set[str]) -> None:
        """Mail new this cycle: answers to questions, messages of a thread, task ends."""
        self.shown_mail = {item.message.id for item in unread}
        for item in unread:
            m = item.message
            if f"mail:{m.id}" not in new:
                continue
            self.heard(m.from_, m.task)
            if m.id.startswith(("done-", "failed-")):  # a task's end notice (`notice_id`)
                self.conversations.task_ended()
            else:
                self.conversations.heard(m.from_, thread_key(m.thread or m.in_reply_to,
                                                             m.task, m.subject))

    def snapshot(self) -> dict[str, TrackRecord]:
        """The tracks as the audit record keeps them (`restore` reads them back)."""
        return {tid: TrackRecord(attempt=t.attempt, rounds=t.rounds, idle=t.idle,
                                 waits=t.waits, asked=sorted(t.asked),
                                 children=sorted(t.children))
                for tid, t in self.tracks.items()}

    def restore(self, records: Iterable[AuditRecord], held: dict[str, int],
                retried: Mapping[str, datetime] | None = None) -> None:
        """After a restart: each held task's track as the last cycle record of its
        current attempt left it, so its ceilings and what it waits for outlive the
        daemon (a retried task starts afresh: records older than its `retried` time
        are not its own)."""
        self.mirrored = None  # its cycles run here from now on (a worker's came home)
        since = retried or {}
        for rec in records:
            for tid, t in rec.held.items() if isinstance(rec, CycleRecord) else ():
                if t.attempt != held.get(tid, -1):
                    continue
                if tid in since and (rec.time is None or not at_or_after(rec.time, since[tid])):
                    continue
                self.tracks[tid] = TaskTrack(
                    attempt=held[tid], idle=t.idle, rounds=t.rounds, waits=t.waits or None,
                    asked=set(t.asked), children=set(t.children))

    def input_keys(self) -> set[str]:
        return {f"followup:{self.turn}"} if self.pending else set()

    def steps(self, cfg: AgentConfig, held: list[str]) -> int:
        """Rounds this cycle may take: `max_steps`, fewer if a held task is that close to
        its `max_rounds_per_task`."""
        used = [self.tracks[t].rounds for t in held if t in self.tracks]
        return max(1, min([cfg.max_steps, *(cfg.max_rounds_per_task - u for u in used)]))

    def waiting(self) -> dict[str, str]:
        """What each held task waits for, as status shows it."""
        out = {}
        for tid, t in self.tracks.items():
            why = t.waits or (f"an answer from {', '.join(sorted(t.asked))}" if t.asked else "")
            if t.children:
                why = why or f"sub-task {', '.join(sorted(t.children))}"
            if why:
                out[tid] = why
        return out

    def heard(self, sender: str, task: str | None) -> None:
        """A mail from `sender` answers the questions it was asked (about `task`, or any)."""
        for tid, t in self.tracks.items():
            if task in (None, tid):
                t.asked.discard(sender)

    def show_note(self, working: WorkingMemoryManager, cfg: AgentConfig,
                  active: dict[str, TaskRef]) -> None:
        """The follow-up note in view while one is pending (gone otherwise)."""
        named = [tid for tid in self.pending if tid in active]
        if not named:
            working.remove(FOLLOWUP_ID)
            return
        tasks = ", ".join(f"{tid} ({active[tid].task.title or tid})" for tid in named)
        left = min(cfg.max_idle_turns - self.tracks[t].idle for t in named)
        working.add(ContextBlock(
            id=FOLLOWUP_ID, context_type="followup", priority=Priority.CRITICAL,
            related_ids=named,
            summary=(f"Your last turn ended while you hold {tasks}, which wait on nothing. "
                     "Finish each now: complete_task with the result, or fail_task with the "
                     "reason; if one waits for something (an answer, a person, a file), call "
                     f"wait_for naming it. Turns without progress left before it fails: "
                     f"{left}."),
        ))

    def after_turn(self, cfg: AgentConfig, ctx: ToolContext, end: TurnEnd) -> dict[str, str]:
        """Update the tracks after a model turn; the held tasks that must end now, with
        the reason. Sets `pending` (and a new input key) for the others that wait on
        nothing."""
        held = ctx.active_tasks
        self.tracks = {tid: self._track(tid, ref.task.attempts) for tid, ref in held.items()}
        fx = ctx.effects
        if fx.tasks_completed or fx.tasks_failed:
            self.conversations.task_ended()
        for child, parent in fx.delegated.items():
            if parent in self.tracks:
                self.tracks[parent].children.add(child)
        for tid, to in _questions(end.calls, list(held)):
            self.tracks[tid].asked.update(to)
        any_progress = bool(end.progressed or fx.tasks_completed or fx.tasks_failed)
        failing: dict[str, str] = {}
        pending: list[str] = []
        for tid, t in self.tracks.items():
            t.rounds += end.rounds
            if tid in end.progressed:
                t.idle, t.waits = 0, None
            if tid in fx.waits:
                t.waits = fx.waits[tid]
            ceiling = _ceiling(cfg, t, end.tokens.get(tid, 0))
            if ceiling is not None:
                failing[tid] = ceiling
                continue
            if self._waits(t, ctx):
                continue
            if not any_progress:
                t.idle += 1
                if t.idle >= cfg.max_idle_turns:
                    failing[tid] = (f"no progress in {t.idle} turns while nothing was awaited "
                                    f"(max_idle_turns={cfg.max_idle_turns})")
                    continue
            pending.append(tid)
        said = " ".join(end.text.split())[:SAID_CHARS]
        if said:
            failing = {tid: f"{why}; the model's last words: {said}"
                       for tid, why in failing.items()}
        self.pending = pending
        if pending:
            self.turn += 1
        return failing

    def last_task_ended(self, ctx: ToolContext, response: ModelResponse,
                        results: list[ToolResult], mailbox: Mailbox) -> str | None:
        """`LAST_TASK_ENDED` if the round's calls ended the last task the agent held, none
        failed, and no mail waits that the model was not shown; None otherwise."""
        # Then the model's next reply ("Done.") is not needed: the turn ends without it,
        # as an output tool ends a pydantic-ai run. Not after an error (the model must see
        # it), nor while unseen mail waits. No task held: no follow-up can be pending.
        fx = ctx.effects
        ended = {c.input.get("task_id") for c in response.tool_calls
                 if c.name in ("complete_task", "fail_task")}
        if ctx.active_tasks or any(r.is_error for r in results) \
                or ended.isdisjoint([*fx.tasks_completed, *fx.tasks_failed]):
            return None
        if any(item.message.id not in self.shown_mail for item in mailbox.unread()):
            return None
        return LAST_TASK_ENDED

    def _track(self, tid: str, attempt: int) -> TaskTrack:
        """The task's track, a new one for a new claim (a retried task starts afresh)."""
        t = self.tracks.get(tid)
        return t if t is not None and t.attempt == attempt else TaskTrack(attempt=attempt)

    @staticmethod
    def _waits(t: TaskTrack, ctx: ToolContext) -> bool:
        """True if the task waits on something: named by `wait_for`, an answer to a
        question, a sub-task that has not ended."""
        for child in list(t.children):
            ref = ctx.board.find(child)
            if ref is None or ref.state in _ENDED:
                t.children.discard(child)
        return bool(t.waits or t.asked or t.children)


def _ceiling(cfg: AgentConfig, t: TaskTrack, tokens: int) -> str | None:
    """Which per-task ceiling the task reached, as its reason (None: none)."""
    if t.rounds >= cfg.max_rounds_per_task:
        return f"reached max_rounds_per_task={cfg.max_rounds_per_task} ({t.rounds} model rounds)"
    # A ROM's lower budget.per_task stops the task at the next cycle's start (`_paused`).
    limit = cfg.max_tokens_per_task
    if tokens >= limit and (cfg.budget.per_task is None or limit < cfg.budget.per_task):
        return f"reached max_tokens_per_task={limit} ({tokens} tokens)"
    return None


def _questions(calls: list[dict[str, Any]], held: list[str]) -> list[tuple[str, set[str]]]:
    """(task, agents asked) for each message the turn sent about a held task to another
    agent or a person (not a notice: those go out as tasks end)."""
    out = []
    for call in calls:
        if call["name"] != "send_message" or call["error"]:
            continue
        to = call["input"].get("to")
        names = {to} if isinstance(to, str) else {n for n in to or () if isinstance(n, str)}
        for tid in concerned_tasks(call["input"], held):
            out.append((tid, names))
    return out


def end_held(s: HiveServices, ctx: ToolContext, failing: dict[str, str]) -> None:
    """Move each task of `failing` to tasks/failed/ with its reason; tell the person once,
    and the agent that asked for it (it may wait on it)."""
    for tid, reason in failing.items():
        ref = ctx.active_tasks.pop(tid, None)
        if ref is None:
            continue
        try:
            s.board.fail(ref, reason, ctx.agent, final=True)
        except UserError:  # taken from it meanwhile (`hivemind task cancel`): not its to end
            continue
        ctx.effects.tasks_failed.append(tid)
        end_task_memory(ctx, ref, success=False)
        asked = ref.task.reply_to or ref.task.created_by
        to = [HUMAN] if asked in (None, HUMAN, ctx.agent) or not s.hive.is_agent(asked) \
            else [HUMAN, asked]
        title = ref.task.title or ref.task.id
        s.post.send(ctx.agent, to, f"[failed] {title}",
                    f"Task {tid} held by {ctx.agent} was moved to tasks/failed/: {reason}.",
                    task=tid)
        s.mail_sent(to)
        s.task_changed()
