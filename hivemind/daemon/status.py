"""Run totals, and `.hivemind/status.json` kept fresh from snapshots of the run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hivemind.agent.report import CycleReport
from hivemind.clock import utcnow
from hivemind.daemon.outage import agent_state
from hivemind.daemon.runner import AgentRunner
from hivemind.daemon.status_file import (
    AgentRunStatus,
    DaemonStatus,
    McpServerStatus,
    RunTotalsStatus,
    WaitingTask,
)
from hivemind.daemon.workers import WorkerLink
from hivemind.hive.layout import Hive
from hivemind.llm.base import Usage
from hivemind.mcp.api import ServerState

logger = logging.getLogger(__name__)

STATUS_EVERY = 1.0


@dataclass
class RunTotals:
    """What this run did, for the summary and status.json."""

    cycles: int = 0
    errors: int = 0
    tool_calls: int = 0
    tasks_done: int = 0
    tasks_failed: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    unpriced: set[str] = field(default_factory=set)  # models used with no known price
    overhead_ms: list[float] = field(default_factory=list)
    prefix_reuse: list[float] = field(default_factory=list)

    def add(self, report: CycleReport) -> None:
        self.cycles += 1
        self.errors += report.error is not None
        self.tool_calls += report.tool_calls
        self.usage = self.usage + report.usage
        self.cost += report.cost or 0.0
        if report.unpriced_model:
            self.unpriced.add(report.unpriced_model)
        self.overhead_ms.append(report.overhead_ms)
        if report.prefix_reuse is not None:
            self.prefix_reuse.append(report.prefix_reuse)
        self.tasks_done += report.tasks_done
        self.tasks_failed += report.tasks_failed

    def as_status(self) -> RunTotalsStatus:
        return RunTotalsStatus.model_validate(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "errors": self.errors,
            "tool_calls": self.tool_calls,
            "tasks_done": self.tasks_done,
            "tasks_failed": self.tasks_failed,
            "usage": self.usage.model_dump(),
            "cost_usd": round(self.cost, 6),
            "unpriced_models": sorted(self.unpriced),
            "cache_hit_share": round(self.usage.cache_hit_share, 4),
            "overhead_ms_median": (
                round(statistics.median(self.overhead_ms), 2) if self.overhead_ms else None
            ),
        }


@dataclass(frozen=True)
class RunSnapshot:
    """What status.json needs of the running daemon, taken on its loop."""

    provider: str
    stopped_because: str
    runners: Mapping[str, AgentRunner]
    workers: Sequence[WorkerLink]
    waiting: Sequence[tuple[str, str]]
    disk_full: str | None  # why nothing is written now, while the disk is full
    totals: RunTotals
    mcp: Sequence[ServerState] = ()


class StatusWriter:
    """Keeps `.hivemind/status.json` fresh while the daemon runs (atomic replace)."""

    def __init__(self, hive: Hive, snapshot: Callable[[], RunSnapshot]) -> None:
        self.hive = hive
        self.snapshot = snapshot
        self.started_at = utcnow()
        self._problem: str | None = None  # why the last write failed, until one succeeds
        # The loop's write runs in a thread that cancelling the loop does not stop: it
        # may still run when the final one comes. One at a time (they share a temp
        # name), and none after the final one.
        self._writing = threading.Lock()
        self._final_written = False

    def status(self, final: bool = False) -> DaemonStatus:
        """status.json as of now (`final`: the daemon has stopped)."""
        run = self.snapshot()
        agents = {}
        for name, runner in run.runners.items():
            a = runner.agent
            agents[name] = AgentRunStatus(
                state=agent_state(runner, final),
                paused_because=runner.model_pause,
                cycles=a.cycle_no,
                last_error=a.last_error,
                config_error=a.config_error,
                tokens_today=a.budget.spent_today,
                **a.held.status(),  # what held tasks wait for, loop limits' refusals
            )
        return DaemonStatus(
            pid=os.getpid(),
            running=not final,
            stopped_because=run.stopped_because or None,
            provider=run.provider,
            started_at=self.started_at.isoformat(),
            updated_at=utcnow().isoformat(),
            agents=agents,
            workers=[link.status() for link in run.workers],
            waiting_tasks=[WaitingTask(id=t, why=why) for t, why in run.waiting[:50]],
            disk_full=run.disk_full,
            totals=run.totals.as_status(),
            mcp_servers=[McpServerStatus(
                name=m.name, status=m.status.value, transport=m.transport, tools=m.tools,
                agents=list(m.agents), pid=m.pid, restarts=m.restarts, error=m.error,
            ) for m in run.mcp],
        )

    def write(self, final: bool = False) -> None:
        self._write(self.status(final), final=final)

    def _write(self, status: DaemonStatus, *, final: bool = False) -> None:
        with self._writing:
            if self._final_written:
                return  # a refresh that lost the race with the final write: stale
            self._final_written = final
            self._replace(status)

    def _replace(self, status: DaemonStatus) -> None:
        """Write status.json whole. A failure (a full disk, .hivemind/ made read-only) is
        said once and tried again at the next refresh: the daemon's work goes on."""
        path = self.hive.status_file
        tmp = path.with_name(f".status.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(status.dumps(), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            problem = exc.strerror or str(exc)
            if problem != self._problem:
                logger.warning("%s: cannot write it (%s); the agents go on, and it is tried "
                               "again every %g s", self.hive.relative(path), problem,
                               STATUS_EVERY)
            self._problem = problem
            return
        if self._problem is not None:
            logger.warning("%s: written again", self.hive.relative(path))
            self._problem = None

    async def loop(self) -> None:
        while True:
            # Snapshot on the loop (the runners change there), write in a thread.
            await asyncio.to_thread(self._write, self.status())
            await asyncio.sleep(STATUS_EVERY)
