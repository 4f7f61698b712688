"""What the daemon runs: its options, and one runner per agent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import date

from hivemind.agent.cycle import Agent
from hivemind.daemon.workers import WorkerLink

BACKOFF_START = 2.0


@dataclass
class RunOptions:
    until_idle: bool = False
    agents: list[str] | None = None
    max_cycles: int | None = None
    poll: bool | None = None
    idle_settle: float = 0.3
    backoff: float = BACKOFF_START
    workers: int | None = None  # processes to spread the agents over (None: hive.toml)


@dataclass
class AgentRunner:
    agent: Agent
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    busy: bool = False
    failures: int = 0
    retry_at: float = 0.0
    task: asyncio.Task[None] | None = None
    stop: bool = False
    worker: WorkerLink | None = None  # the process that runs its cycles (None: this one)
    paused_on: date | None = None  # the UTC day its daily budget ran out: no new work
    model_wait_since: float | None = None  # (monotonic) first try the model service failed
    model_pause: str | None = None  # why the model API refused it (see `outage`): no cycles
    paused_rom: str = ""  # its ROM's version then: an edit lifts the pause
    steer_pause: str | None = None  # why a person paused it (see `pausing`): no cycles
