"""The run's book of cycles: each one counted (the totals, `--max-cycles`), and what
its end asks of the daemon: a pause, a retry, a follow-up, a dispatch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from hivemind.agent.pause import DAY_SPENT
from hivemind.agent.report import CycleReport
from hivemind.agent.services import HiveServices
from hivemind.clock import utcnow
from hivemind.daemon import outage
from hivemind.daemon.availability import Availability
from hivemind.daemon.runner import AgentRunner, RunOptions
from hivemind.daemon.status import RunTotals


class CycleBook:
    """Counts the cycles of a run and sees to the end of each (`after`)."""

    def __init__(
        self, options: RunOptions, services: HiveServices, availability: Availability, *,
        stop: Callable[[str], None], request_dispatch: Callable[[], None],
        on_cycle: Callable[[CycleReport], None] | None = None,
    ) -> None:
        self.options = options
        self.services = services
        self.availability = availability
        self.stop = stop
        self.request_dispatch = request_dispatch
        self.on_cycle = on_cycle
        self.totals = RunTotals()
        self.taken = 0  # cycles running or run (for --max-cycles)
        self.freed = asyncio.Event()  # one of them did not run after all, or a stop

    async def take(self, runner: AgentRunner, stopping: asyncio.Event) -> bool:
        """With --max-cycles N: wait while N cycles are running or have run (one that
        finds nothing new does not count). False on a stop."""
        limit = self.options.max_cycles
        while limit is not None and self.taken >= limit:
            if runner.stop or stopping.is_set():
                return False
            self.freed.clear()
            await self.freed.wait()
        self.taken += 1
        return True

    def count(self, report: CycleReport) -> None:
        self.totals.add(report)
        if self.on_cycle is not None:
            self.on_cycle(report)

    def after(self, runner: AgentRunner, report: CycleReport) -> None:
        """A cycle of `runner` ended with `report` (here, or in its worker)."""
        paused_on = utcnow().date() if report.reason == DAY_SPENT else None
        if paused_on != runner.paused_on and (report.ran or paused_on is not None):
            runner.paused_on = paused_on  # routing changes: no new work for it, or again
            self.availability.forget()
            self.request_dispatch()  # and the waiting list says why tasks wait
        if not report.ran:
            self.totals.tasks_failed += report.tasks_failed  # failed by its budget
            self.taken -= 1  # nothing new: it did not count as a cycle
            self.freed.set()
            return
        self.count(report)
        if self.options.max_cycles is not None and self.totals.cycles >= self.options.max_cycles:
            self.stop("max-cycles")  # failed cycles count: each may have cost tokens
        if outage.pause_if_refused(self.services, runner, report):
            self.availability.forget()
            self.request_dispatch()
        if outage.schedule_retry(runner, report, self.options.backoff):
            return
        if report.followup:  # held work that waits on nothing: on at once
            runner.wake.set()
        self.request_dispatch()  # tasks finished: others may be claimable now (activity)
