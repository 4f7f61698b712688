"""One agent's think-cycle: perceive → select → build → model + tools → record.

The control of it; the parts live beside it: the context (`view`), budgets at the
start (`pause`), the audit record (`report`, `record`, `audit`, `flushes`), the
steps kept in view (`history`), held work (`followup`), reflection (`reflect`).
No new input since the last cycle → no model call. A mistake of the model
becomes a tool error it sees next round; a model API failure ends the cycle
by its kind (`model_failure`: mail stays unread, nothing is marked done);
the audit record is written in `finally:` whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from hivemind.agent.audit import AuditLog
from hivemind.agent.budget import BudgetTracker, start_of_day
from hivemind.agent.flushes import RecordFlushes
from hivemind.agent.followup import HeldWork, TurnEnd, end_held
from hivemind.agent.history import compact_history, keep_steps_of, note_said
from hivemind.agent.model_failure import fail_refused_tasks, note_model_error
from hivemind.agent.pause import BudgetPause
from hivemind.agent.perceive import Perception, perceive
from hivemind.agent.prefix import PrefixReuse
from hivemind.agent.rating import ImportanceRating
from hivemind.agent.record import (
    CycleStart,
    DroppedEntry,
    RomFixed,
    RomProblem,
    UsageClamped,
)
from hivemind.agent.reflect import ProviderReflector, reflect
from hivemind.agent.report import CycleReport
from hivemind.agent.restore import restore_history
from hivemind.agent.services import HISTORY_KEPT, HiveServices
from hivemind.agent.toolrun import ToolRunner
from hivemind.agent.view import ContextAssembler
from hivemind.errors import ConfigError, ModelError, UnknownAgentError
from hivemind.fs.loopflusher import LoopFlusher
from hivemind.hive.mailbox import Mailbox
from hivemind.llm.base import (
    AssistantTurn,
    ModelRequest,
    ModelResponse,
    ToolResultsTurn,
    Turn,
    with_valid_text,
)
from hivemind.llm.pricing import estimate_cost
from hivemind.memory.builder import BuiltContext
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools.base import ToolContext


def _cancelling() -> bool:
    """True while the running task is being cancelled (its cycle cut short)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class Agent:
    """One agent of the hive; the daemon runs `cycle()` when something concerns it."""

    def __init__(self, name: str, services: HiveServices) -> None:
        self.name = name
        self.s = services  # for what the daemon sets late: ltm, callbacks, model slots
        self.board = services.board
        self.roms = services.roms
        self.provider = services.provider
        self.mailbox = Mailbox(services.hive, name)
        self.working = WorkingMemoryManager()
        self.context = ContextAssembler(name, services, self.working)
        self.prefix_reuse = PrefixReuse()
        self.audit = AuditLog(services.hive.audit_path(name), secrets=services.secrets,
                              fsync=services.config.daemon.fsync)
        self.cycle_no = 0
        self.budget = BudgetTracker()
        self.seen: set[str] = set()
        self.tool_runner = ToolRunner(name, services, self.working)
        self.held = HeldWork()  # follow-ups and ceilings of the tasks it holds
        self.config_error: str | None = None
        self._audited_error: str | None = None
        self._gone = False  # its ROM.md is missing (see `config`)
        self.last_error: str | None = None
        self.flushes = RecordFlushes(self.audit)
        self.pause = BudgetPause(name, services, self.working, self.audit)
        self.rating = ImportanceRating(name)
        # The report of a cycle whose record is written, until the cycle returns it: a
        # stop that cuts the cycle after its record still counts it (`Daemon`).
        self.recorded: CycleReport | None = None

    def recover(self) -> list[int]:
        """On daemon start: mark interrupted cycles, restore counters and budgets, and
        drop claimed copies of tasks a stop left behind finished (`retire_finished`)."""
        self.board.retire_finished(self.name)
        interrupted = self.audit.mark_interrupted()
        self.cycle_no = self.audit.last_cycle
        self._audited_error = self.audit.config_error  # a fix made meanwhile is told
        today = start_of_day()
        held = self.board.active(self.name)
        # A retried task's ceilings count from its retry (`hivemind task retry`).
        retried = {r.task.id: r.task.retried_at for r in held if r.task.retried_at}
        spent, per_task = self.audit.usage_since(today, retried)
        self.budget = BudgetTracker(spent_today=spent, per_task=per_task,
                                    warned=self.audit.warnings_since(today),
                                    retried=dict(retried))
        self.restore()
        self.held.restore(self.audit.records(), {r.task.id: r.task.attempts for r in held},
                          retried)
        return interrupted

    def restore(self) -> int:
        """The steps taken for the tasks it still holds, back in working memory from the
        audit log (after a restart, or for a look from another process); how many."""
        held = [ref.task.id for ref in self.board.active(self.name)]
        return restore_history(self.audit, held, self.working, HISTORY_KEPT,
                               max_age=self.s.janitor.history_max_age)

    # -- configuration -------------------------------------------------------
    def config(self) -> AgentConfig | None:
        """The last good ROM config (None if the agent never had a valid one)."""
        self._gone = False
        try:
            cfg = self.roms.load(self.name)
        except ConfigError as exc:
            self.config_error = str(exc)
            return None
        except UnknownAgentError as exc:  # removed just now: the daemon hears of it soon
            self.config_error, self._gone = str(exc), True
            return None
        self.config_error = self.roms.error(self.name)
        return cfg

    def _audit_config_error(self) -> None:
        """A new problem of the ROM, or its fix, goes to the audit log once (from the
        process that runs the cycles: one record, however many look at the ROM)."""
        if self.config_error == self._audited_error or self._gone:
            return
        self._audited_error = self.config_error
        with contextlib.suppress(OSError):  # the log's own trouble shows at the next cycle
            if self.config_error is not None:
                self.audit.append(RomProblem(cycle=self.cycle_no, error=self.config_error))
            else:
                self.audit.append(RomFixed(cycle=self.cycle_no))

    # -- the cycle -----------------------------------------------------------
    async def cycle(self) -> CycleReport:
        """Run one cycle if there is new input; otherwise return at once, free."""
        report = CycleReport(agent=self.name)
        self.recorded = None
        cfg = self.config()
        self._audit_config_error()
        if cfg is None:
            report.reason = "no valid ROM"
            return report
        p = perceive(
            self.s.hive, cfg, self.board, self.mailbox, self.s.knowledge, self.working,
            self.s.figures(),
        )
        p.input_keys |= self.held.input_keys()
        new = (p.input_keys | p.watch_keys) - self.seen
        if not new or not (p.has_work or (p.watch_keys - self.seen)):
            report.reason = "no new input"
            return report
        paused = self.pause.check(self.budget, cfg, p, report, self.cycle_no, self.seen)
        if paused is not None:
            report.reason = paused
            return report
        self.held.hear(p.unread, new)
        # Repeats count per task while the agent holds it; while it holds none, within
        # one cycle.
        self.tool_runner.start_cycle(self.cycle_no + 1, list(p.active))
        with LoopFlusher.of(asyncio.get_running_loop()).using():
            await self._think(cfg, p, report)
        report.duration_ms = (time.perf_counter() - report.started) * 1000
        if not report.retry:
            # The model had its say (even if it hit max_steps): wait for new input. Only
            # a failed model call leaves the input unseen, to be retried after a back-off.
            self.seen |= new
        return report

    async def _think(self, cfg: AgentConfig, p: Perception, report: CycleReport) -> None:
        self.cycle_no += 1
        report.cycle = self.cycle_no
        report.ran = True
        task_ids = list(p.active)
        mail_ids = [m.message.id for m in p.unread]
        keep_steps_of(self.working, set(p.active))  # (a task taken away since the last cycle)
        self.held.show_note(self.working, cfg, p.active)
        view = await self.context.view(cfg, p)
        built, dropped = view.context, view.dropped_rows()
        request = self.context.request(cfg, view)
        report.prefix_reuse = self.prefix_reuse(request)
        report.input_tokens = built.tokens
        # The start line is written now and flushed with the first files the tools
        # flush (one trip to the disk, not two), so it is on disk before any of their
        # effects shows; a cycle whose tools flush nothing flushes it at its end.
        self.audit.write(CycleStart(cycle=self.cycle_no, tasks=task_ids, mail=mail_ids))
        start_flushed = self.audit.flushed(lazy=True)
        ctx = ToolContext(
            hive=self.s.hive, agent=self.name, config=cfg, board=self.board, post=self.s.post,
            working=self.working, active_tasks=dict(p.active), ltm=self.s.ltm,
            on_mail=self.s.mail_sent, on_task_change=self.s.task_changed,
            conversations=self.held.conversations,
        )
        if view.recalled is not None:
            ctx.effects.memories.append(view.recalled)
        calls: list[dict[str, Any]] = []
        said: list[str] = []
        marks_mail = False
        try:
            await self._rounds(cfg, request, report, task_ids, ctx, calls, said)
            if not report.retry:  # (a reply cut at max_tokens is retried after a back-off)
                end = TurnEnd(report.rounds, self.tool_runner.progressed,
                              said[-1] if said else "", calls, self.budget.per_task)
                end_held(self.s, ctx, self.held.after_turn(cfg, ctx, end))
                report.followup = bool(self.held.pending)
        except ModelError as exc:
            note_model_error(report, exc)
            if fail_refused_tasks(self.board, self.name, ctx.active_tasks, report):
                self.s.task_changed()
        except Exception as exc:  # a crash: its record says so, the daemon counts its tokens
            report.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.audit.kick()
            if not _cancelling():
                # Cut short (the daemon's grace period ran out), a cycle has no record:
                # its start line stays open, and the next start marks it interrupted.
                await start_flushed
                text = said[-1] if said else ""
                self.recorded = report  # counted even if its record cannot be written
                self._record(report, built, dropped, calls, text, ctx, task_ids, mail_ids)
                marks_mail = await self._record_flushed(p, report, calls)
        # Mail is marked read only now that the cycle's record is on disk.
        unmoved = self._mark_read(p) if marks_mail else None
        self.last_error = report.error or unmoved or ctx.effects.internal_error
        compact_history(self.working, ctx, calls)
        self.s.janitor.sweep(self.working)
        if self.s.ltm is not None and ctx.effects.memories and report.error is None:
            ref = next(iter(p.active.values()), None)
            await reflect(self.s.ltm, ProviderReflector(self.provider, self.name, cfg.model),
                          ref.task.project if ref else None, self.audit, self.cycle_no)

    def _mark_read(self, p: Perception) -> str | None:
        """Mark the cycle's mail read; why a message could not move, if one could not."""
        unmoved = None
        for item in p.unread:
            self.mailbox.mark_read(item)
            if not item.read:  # logged; and shown in status until a cycle runs clean
                unmoved = self.mailbox.problem
        return unmoved

    async def _rounds(
        self, cfg: AgentConfig, request: ModelRequest, report: CycleReport,
        task_ids: list[str], ctx: ToolContext, calls: list[dict[str, Any]], said: list[str],
    ) -> None:
        """The model's rounds, then (unless to be retried) one rating request if due."""
        await self._model_rounds(cfg, request, report, task_ids, ctx, calls, said)
        if not report.retry:
            await self._rate(cfg, report, ctx, task_ids)

    async def _model_rounds(
        self, cfg: AgentConfig, request: ModelRequest, report: CycleReport,
        task_ids: list[str], ctx: ToolContext, calls: list[dict[str, Any]], said: list[str],
    ) -> None:
        """Model call, its tool calls, and again, up to `max_steps` rounds or the round
        that ends its last task (`last_task_ended`). Logs calls and text as they come."""
        turns: list[Turn] = []
        for _ in range(self.held.steps(cfg, task_ids)):
            asked = request.model_copy(update={"turns": turns})
            response = await self._call(asked, report, task_ids)
            report.stop_reason = response.stop_reason
            if response.text:
                said.append(response.text)
            if not response.tool_calls:
                if response.stop_reason == "refusal":
                    # Not retried (the same input would be refused again), but never
                    # silent: the task it holds stays, and status and the log say why.
                    report.error = "the model refused to answer (stop_reason refusal)"
                elif not turns and not response.text and response.stop_reason != "max_tokens":
                    # Nothing said and nothing done in the whole cycle: as with a refusal,
                    # the input counts as seen (the same request would likely get the same
                    # nothing), but status and the log say so.
                    report.error = (f"the model answered with nothing: no text and no "
                                    f"tool call (stop_reason {response.stop_reason})")
                if response.stop_reason == "max_tokens":
                    # A reply cut short is a failed call: retried after a back-off.
                    report.error = (f"the reply was cut at max_output_tokens="
                                    f"{cfg.max_output_tokens} (stop_reason max_tokens)")
                    report.retry = True
                return
            started = time.perf_counter()
            results = await self.tool_runner.run_calls(ctx, response, cfg, calls)
            report.tools_ms += (time.perf_counter() - started) * 1000
            stop = self.tool_runner.break_loops(ctx, response.tool_calls, results, calls)
            turns = [*turns, AssistantTurn(text=response.text, tool_calls=response.tool_calls),
                     ToolResultsTurn(results=results)]
            report.ended = self.held.last_task_ended(ctx, response, results, self.mailbox)
            if stop or report.ended:
                return
        if not self.tool_runner.progressed:  # with progress, the next cycle goes on
            report.error = f"stopped after max_steps={cfg.max_steps} rounds without progress"

    async def _rate(
        self, cfg: AgentConfig, report: CycleReport, ctx: ToolContext, task_ids: list[str]
    ) -> None:
        """One importance-rating request after the cycle's own calls, if due (`rating`)."""
        spent = report.usage.total_input + report.usage.output_tokens
        used, entry = await self.rating.after_cycle(
            self.s.ltm, self.provider, cfg.model, spent, self.s.config.memory.rating_share,
            self.s.model_slots,
        )
        if entry is not None:
            ctx.effects.memories.append(entry)
        if used.total_input + used.output_tokens:
            report.usage = report.usage + used
            self.budget.record(used.total_input + used.output_tokens, task_ids)

    async def _record_flushed(
        self, p: Perception, report: CycleReport, calls: list[dict[str, Any]]
    ) -> bool:
        """True once the record is on disk if the cycle's mail moves to cur/ after it
        (never after a provider error: the model's turn did not end). Otherwise nothing
        waits on it: its flush overlaps what comes next and False is returned."""
        if p.unread and report.model_failure is None and (not report.retry or calls):
            await self.flushes.wait()
            return True
        self.flushes.in_background()
        return False

    async def settle(self) -> None:
        """Wait until every audit record written so far is on disk (at shutdown)."""
        await self.flushes.settle()

    async def _call(
        self, request: ModelRequest, report: CycleReport, task_ids: list[str]
    ) -> ModelResponse:
        async with self.s.model_slots:
            t0 = time.perf_counter()
            try:
                response = await self.provider.complete(request)
            finally:
                report.model_ms += (time.perf_counter() - t0) * 1000
        report.usage = report.usage + response.usage
        if response.usage_note:  # the endpoint's figures were clamped: said in the log
            self.audit.write(UsageClamped(cycle=self.cycle_no, note=response.usage_note))
        report.rounds += 1
        self.budget.record(response.usage.total_input + response.usage.output_tokens, task_ids)
        return with_valid_text(response)

    def _record(
        self,
        report: CycleReport,
        built: BuiltContext,
        dropped: list[DroppedEntry],
        calls: list[dict[str, Any]],
        text: str,
        ctx: ToolContext,
        task_ids: list[str],
        mail_ids: list[str],
    ) -> None:
        """Sum the cycle up in `report` and write its audit record (flushed by the caller)."""
        report.sum_up(ctx.effects, len(calls))
        if not self.provider.offline:
            report.cost = estimate_cost(report.usage, ctx.config.model, self.s.config.pricing)
            if report.cost is None and report.usage.total_input + report.usage.output_tokens:
                report.unpriced_model = ctx.config.model
        note_said(self.working, text, task_ids, report.cycle)
        self.audit.write(report.record(
            agent=self.name, provider=self.provider.name, tasks=task_ids, mail=mail_ids,
            built=built, dropped=dropped, calls=calls, text=text, effects=ctx.effects,
            followup=self.held.pending if report.followup else [], held=self.held.snapshot(),
        ))

