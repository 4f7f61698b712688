"""What one think-cycle did: its report (also the body of its audit record)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from hivemind.llm.base import Usage


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

    @property
    def overhead_ms(self) -> float:
        return self.duration_ms - self.model_ms
