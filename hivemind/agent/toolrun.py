"""Running one round of the model's tool calls, and the loop breaker.

The calls of a round were written together, blind to each other's results, so they
run overlapped (see `ToolRunner.run_calls`). The same call repeated `loop_breaker`
times for a task, with the same answer each time, stops that task; repeated while no
task is held, it ends the cycle. A call whose answer changed (a folder listed again
after a write) made progress: its count starts again.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from hivemind.agent.concerns import concerned_tasks
from hivemind.agent.services import HiveServices
from hivemind.hive.models import AgentConfig
from hivemind.llm.base import ModelResponse, ToolCall, ToolResult
from hivemind.memory.blocks import HistoryBlock, Priority
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.tools.base import Footprint, ToolContext, canonical_call
from hivemind.tools.memory import end_task_memory

SUMMARY_CHARS = 300
NO_TASK = "-"  # the loop breaker's key for calls made while no task is held


def short(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """`value` as text (JSON unless a string), cut to `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "…"


def _finished(result: ToolResult) -> asyncio.Task[ToolResult]:
    """A result that needs no running, as a task among the round's others."""

    async def ready() -> ToolResult:
        return result

    return asyncio.ensure_future(ready())


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
        self.loops: dict[str, Counter[str]] = {}  # per task held (or NO_TASK): call → times
        self._answers: dict[str, dict[str, int]] = {}  # ... call → hash of its last answer
        self._repeated: dict[str, str] = {}  # the keys whose call reached the limit this round
        self.progressed: set[str] = set()  # tasks with a call this cycle not made before

    def start_cycle(self, cycle_no: int, held: list[str]) -> None:
        """Repeats count on only for the tasks still held."""
        self.cycle_no = cycle_no
        self.loops = {k: v for k, v in self.loops.items() if k in held}
        self._answers = {k: v for k, v in self._answers.items() if k in held}
        self._repeated = {}
        self.progressed = set()

    async def run_calls(
        self, ctx: ToolContext, response: ModelResponse, cfg: AgentConfig,
        calls: list[dict[str, Any]],
    ) -> list[ToolResult]:
        """Run one round's tool calls; each is also appended to `calls`, in order.

        Each call starts in call order and does its file work at once, then all wait
        for the disk together (one flush for the round, see `atomic.LoopFlusher`) and
        make their files visible in call order. A call whose footprint conflicts with
        an unfinished earlier one (it reads what that one writes) first waits for the
        round so far: it sees every earlier effect, as if the calls had run one by one.
        """
        cut = response.stop_reason == "max_tokens"
        running: list[asyncio.Task[ToolResult]] = []
        touched = Footprint.of()  # what the unfinished calls read and write, together
        started: list[asyncio.Task[ToolResult]] = []
        try:
            for i, call in enumerate(response.tool_calls):
                if cut and i == len(response.tool_calls) - 1:
                    # Only the last block can be cut short: its input may be half of it.
                    started.append(_finished(_cut_call(call, cfg.max_output_tokens)))
                    continue
                footprint = self.s.tools.footprint(call)
                if running and footprint.after(touched):
                    await asyncio.wait(running)
                    running, touched = [], Footprint.of()
                task = asyncio.ensure_future(self._run_tool(ctx, call))
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
        return results

    async def _run_tool(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        # The tasks it is for, among those still held (a task finished earlier in the
        # cycle is no longer any call's); none held: counted under NO_TASK.
        concerned = concerned_tasks(call.input, list(ctx.active_tasks))
        canonical = canonical_call(call)
        limit = self.s.config.daemon.loop_breaker
        over = True
        for key in concerned or [NO_TASK]:
            counts = self.loops.setdefault(key, Counter())
            counts[canonical] += 1
            if counts[canonical] >= limit:
                self._repeated.setdefault(key, canonical)  # `break_loops` acts on it
            over = over and counts[canonical] > limit
        if over:  # past the limit in this round already: its effects are not repeated
            result = ToolResult(tool_use_id=call.id, is_error=True,
                                content=f"not run: the same call was made {limit} times")
        else:
            result = await self.s.tools.execute(ctx, call)
            self._progress(concerned or [NO_TASK], canonical, result, limit)
        # Recorded as the call ends: a task finished later in the round consolidates the
        # steps that led to it (its own: see `concerned_tasks`).
        self.working.add(
            HistoryBlock(
                action=call.name,
                detail=short(call.input, 200),
                result=("error: " if result.is_error else "") + short(result.content, 200),
                priority=Priority.MEDIUM,
                metadata={"task_ids": concerned, "cycle": self.cycle_no},
            )
        )
        return result

    def _progress(self, keys: list[str], canonical: str, result: ToolResult, limit: int) -> None:
        """A call whose answer differs from its last one is no repeat: its count starts
        again at this call (and a limit it reached is not acted on), and it is progress
        for its tasks."""
        answer = hash((result.is_error, result.content))
        for key in keys:
            answers = self._answers.setdefault(key, {})
            before, answers[canonical] = answers.get(canonical), answer
            if before != answer and key != NO_TASK:
                self.progressed.add(key)
            counts = self.loops.get(key)
            if before is None or before == answer or counts is None:
                continue
            counts[canonical] = 1
            if self._repeated.get(key) == canonical and limit > 1:
                del self._repeated[key]

    def break_loops(self, ctx: ToolContext, round_calls: list[ToolCall],
                    results: list[ToolResult], log: list[dict[str, Any]]) -> bool:
        """Stop what the round repeated too often: a task (its other tasks go on), or,
        with no task held, the cycle. The results of the repeated calls (and their audit
        entries) say so. True if the cycle must end: that, or no task is left."""
        limit = self.s.config.daemon.loop_breaker
        end = stopped = False
        tripped, self._repeated = self._repeated, {}
        for key, repeated in tripped.items():
            self.loops.pop(key, None)
            self._answers.pop(key, None)
            reason = (f"stopped: the same tool call was repeated {limit} times "
                      f"({short(repeated, 120)})")
            if key != NO_TASK:
                ref = ctx.active_tasks.pop(key, None)
                if ref is None:
                    continue  # finished earlier in the cycle: nothing left to stop
                self.s.board.fail(ref, reason, self.name, final=True)
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
