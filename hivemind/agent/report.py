"""What one think-cycle did: its report (also the body of its audit record)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hivemind.agent.record import (
    CycleRecord,
    DroppedEntry,
    EffectsRecord,
    ToolCallRecord,
    TrackRecord,
)
from hivemind.agent.toolrun import short
from hivemind.llm.base import Usage
from hivemind.memory.builder import BuiltContext
from hivemind.tools.base import CycleEffects


class FailureKind(StrEnum):
    """What kind of provider error a cycle met: only a transient one is retried."""

    TRANSIENT = "transient"
    ACCESS = "access"
    REQUEST = "request"


@dataclass
class CycleReport:
    """What one cycle did (also the body of its audit record)."""

    agent: str
    cycle: int = 0
    ran: bool = False
    reason: str = ""
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    unpriced_model: str | None = None  # used tokens of a model with no price in [pricing]
    tool_calls: int = 0
    error: str | None = None
    duration_ms: float = 0.0
    model_ms: float = 0.0
    tools_ms: float = 0.0  # running the model's tool calls (their file work, flushes)
    prefix_reuse: float | None = None
    input_tokens: int = 0
    tasks_done: int = 0
    tasks_failed: int = 0
    messages_sent: int = 0
    stop_reason: str | None = None  # of the model's last reply
    ended: str | None = None  # why the turn ended with no closing model call (`followup`)
    retry: bool = False
    retry_after: float | None = None  # seconds the API asked to wait before a retry
    model_failure: FailureKind | None = None  # the kind of a provider error, if one
    rounds: int = 0  # model calls made
    followup: bool = False  # held work waits on nothing: another cycle at once
    started: float = field(default_factory=time.perf_counter)

    def sum_up(self, effects: CycleEffects, calls: int) -> None:
        """The cycle's figures from what its tools did."""
        self.tool_calls = calls
        self.tasks_done = len(effects.tasks_completed)
        self.tasks_failed += len(effects.tasks_failed)  # after any its budget failed first
        self.messages_sent = len(effects.messages_sent)

    def record(
        self, *, agent: str, provider: str, tasks: list[str], mail: list[str],
        built: BuiltContext, dropped: list[DroppedEntry], calls: list[dict[str, Any]],
        text: str, effects: CycleEffects, followup: list[str], held: dict[str, TrackRecord],
    ) -> CycleRecord:
        """The cycle's audit record, timed up to now."""
        fx = effects
        return CycleRecord(
            cycle=self.cycle,
            agent=agent,
            provider=provider,
            tasks=tasks,
            mail=mail,
            kept=[{"id": e["id"], "tokens": built.token_counts.get(e["id"], 0)}
                  for e in built.entries],
            dropped=dropped,
            context_tokens=built.tokens,
            usage=self.usage,
            cost=self.cost,
            tool_calls=[ToolCallRecord.model_validate(c) for c in calls],
            text=short(text, 1000),
            effects=EffectsRecord(
                messages_sent=fx.messages_sent, files_written=fx.files_written,
                tasks_created=fx.tasks_created, tasks_completed=fx.tasks_completed,
                tasks_failed=fx.tasks_failed, memories=fx.memories,
                waits=fx.waits, refusals=fx.refusals, delegated=fx.delegated,
            ),
            followup=followup,
            held=held,
            error=self.error,
            stop_reason=self.stop_reason, ended=self.ended,
            duration_ms=round((time.perf_counter() - self.started) * 1000, 1),
            model_ms=round(self.model_ms, 1),
            tools_ms=round(self.tools_ms, 1),
        )

    @property
    def overhead_ms(self) -> float:
        return self.duration_ms - self.model_ms
