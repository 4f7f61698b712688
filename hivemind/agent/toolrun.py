"""Running one round of the model's tool calls, and the loop breaker.

The calls of a round were written together, blind to each other's results, so they
run overlapped (see `ToolRunner.run_calls`); identical ones are one call. A task that
repeats a call `loop_breaker` rounds without progress stops (the rule: `agent.loops`);
while no task is held, the cycle ends.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hivemind.agent.concerns import concerned_tasks
from hivemind.agent.loops import NO_TASK, LoopCounter
from hivemind.agent.services import HiveServices
from hivemind.errors import UserError
from hivemind.llm.base import ModelResponse, ToolCall, ToolResult
from hivemind.memory.blocks import HistoryBlock, Priority
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools.base import Footprint, ToolContext, canonical_call
from hivemind.tools.memory import end_task_memory

SUMMARY_CHARS = 300


def short(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """`value` as text (compact JSON unless a string: it goes into the context, where a
    space after each `,` and `:` is paid for), cut to `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(
        value, default=str, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit] + "…"


def step_result(name: str, content: str, is_error: bool) -> str:
    """What a step's history entry says came of it: the result, cut to 200 characters;
    of a read_file, its first line (what was read): the text itself stays in view."""
    if name == "read_file" and not is_error:
        content = content.split("\n", 1)[0]
    return ("error: " if is_error else "") + short(content, 200)


def _finished(result: ToolResult) -> asyncio.Task[ToolResult]:
    """A result that needs no running, as a task among the round's others."""

    async def ready() -> ToolResult:
        return result

    return asyncio.ensure_future(ready())


async def _same_answer(twin: asyncio.Task[ToolResult], call: ToolCall) -> ToolResult:
    """The answer of the identical call made earlier in the round, as this call's."""
    result = await twin
    return ToolResult(tool_use_id=call.id, content=result.content, is_error=result.is_error)


def _cut_call(call: ToolCall, max_tokens: int) -> ToolResult:
    return ToolResult(
        tool_use_id=call.id,
        is_error=True,
        content=(f"not run: your reply reached max_tokens ({max_tokens} output tokens) inside "
                 f"this {call.name} call, so its input may be cut short; call it again with "
                 "shorter input (write long text in parts)"),
    )


class ToolRunner:
    """One agent's tool rounds: runs them, records each call as a HISTORY block, and
    counts repeats per task it holds (while it holds none, within one cycle)."""

    def __init__(self, name: str, services: HiveServices, working: WorkingMemoryManager) -> None:
        self.name = name
        self.s = services
        self.working = working
        self.cycle_no = 0
        self.loops = LoopCounter()
        self._repeated: dict[str, str] = {}  # the keys whose call reached the limit this round

    @property
    def progressed(self) -> set[str]:
        """Tasks with a call this cycle not made before (or whose answer changed)."""
        return self.loops.progressed

    def start_cycle(self, cycle_no: int, held: list[str]) -> None:
        """Repeats count on only for the tasks still held."""
        self.cycle_no = cycle_no
        self.loops.start_cycle(held)
        self._repeated = {}

    async def run_calls(
        self, ctx: ToolContext, response: ModelResponse, cfg: AgentConfig,
        calls: list[dict[str, Any]],
    ) -> list[ToolResult]:
        """Run one round's tool calls; each is also appended to `calls`, in order.

        Each call starts in call order and does its file work at once, then all wait
        for the disk together (one flush for the round, see `loopflusher.LoopFlusher`) and
        make their files visible in call order. A call whose footprint conflicts with
        an unfinished earlier one (it reads what that one writes) first waits for the
        round so far: it sees every earlier effect, as if the calls had run one by one.
        A call identical to an earlier one gets its answer (the model asked it once per
        task it was for), unless a call between them wrote what it reads.
        """
        cut = response.stop_reason == "max_tokens"
        held = list(ctx.active_tasks)
        running: list[asyncio.Task[ToolResult]] = []
        touched = Footprint.of()  # what the unfinished calls read and write, together
        started: list[asyncio.Task[ToolResult]] = []
        made: dict[str, tuple[Footprint, asyncio.Task[ToolResult]]] = {}  # call → its run
        try:
            for i, call in enumerate(response.tool_calls):
                if cut and i == len(response.tool_calls) - 1:
                    # Only the last block can be cut short: its input may be half of it.
                    started.append(_finished(_cut_call(call, cfg.max_output_tokens)))
                    continue
                canonical = canonical_call(call)
                if (twin := made.get(canonical)) is not None:
                    started.append(asyncio.ensure_future(_same_answer(twin[1], call)))
                    continue
                footprint = self.s.tools.footprint(call)
                writes = Footprint.of(writes=footprint.writes)
                made = {c: run for c, run in made.items() if not run[0].after(writes)}
                if running and footprint.after(touched):
                    await asyncio.wait(running)
                    running, touched = [], Footprint.of()
                task = asyncio.ensure_future(self._run_tool(ctx, call))
                made[canonical] = (footprint, task)
                running.append(task)
                touched = touched.union(footprint)
                started.append(task)
        finally:
            # Every call started runs to its end, whatever happens to the others (a tool's
            # bug propagates, but only once the round's files are consistent).
            if started:
                await asyncio.wait(started)
        results = [t.result() for t in started]
        for call, result in zip(response.tool_calls, results, strict=True):
            calls.append({"name": call.name, "input": call.input,
                          "result": short(result.content), "error": result.is_error})
        ran = list(zip(response.tool_calls, results, strict=True))
        self._repeated = self.loops.count_round(held, ran[:-1] if cut else ran,
                                                self.s.config.daemon.loop_breaker)
        return results

    async def _run_tool(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        # The tasks it is for, among those still held (a task finished earlier in the
        # cycle is no longer any call's).
        concerned = concerned_tasks(call.input, list(ctx.active_tasks))
        result = await self.s.tools.execute(ctx, call)
        # Recorded as the call ends: a task finished later in the round consolidates the
        # steps that led to it (its own: see `concerned_tasks`).
        self.working.add(
            HistoryBlock(
                action=call.name,
                detail=short(call.input, 200),
                result=step_result(call.name, result.content, result.is_error),
                priority=Priority.MEDIUM,
                metadata={"task_ids": concerned, "cycle": self.cycle_no},
            )
        )
        return result

    def break_loops(self, ctx: ToolContext, round_calls: list[ToolCall],
                    results: list[ToolResult], log: list[dict[str, Any]]) -> bool:
        """Stop what the round repeated too often: a task (its other tasks go on), or,
        with no task held, the cycle. The results of the repeated calls (and their audit
        entries) say so. True if the cycle must end: that, or no task is left."""
        limit = self.s.config.daemon.loop_breaker
        end = stopped = False
        tripped, self._repeated = self._repeated, {}
        for key, repeated in tripped.items():
            self.loops.forget(key)
            reason = (f"stopped: the same tool call was repeated {limit} times "
                      f"({short(repeated, 120)})")
            if key != NO_TASK:
                ref = ctx.active_tasks.pop(key, None)
                if ref is None:
                    continue  # finished earlier in the cycle: nothing left to stop
                try:
                    self.s.board.fail(ref, reason, self.name, final=True)
                except UserError:  # taken from it meanwhile (`hivemind task cancel`)
                    continue
                ctx.effects.tasks_failed.append(key)
                end_task_memory(ctx, ref, success=False)
                self.s.task_changed()
                stopped = True
                note = f"[hivemind] task {key} was {reason}; it is in tasks/failed/"
            else:
                end = True
                note = f"[hivemind] this cycle was {reason}"
            first = len(log) - len(round_calls)
            for i, call in enumerate(round_calls):
                if canonical_call(call) == repeated:
                    content = f"{results[i].content}\n{note}"
                    results[i] = ToolResult(tool_use_id=results[i].tool_use_id, is_error=True,
                                            content=content)
                    log[first + i].update(result=short(content), error=True)
        return end or (stopped and not ctx.active_tasks)
