"""The lead's side of the worker processes: deal the agents out, start the workers,
take their late reports and their ends, stop them (a part of `Daemon`)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Collection
from typing import TYPE_CHECKING

from hivemind.agent.cycle import Agent
from hivemind.agent.report import CycleReport
from hivemind.agent.services import HiveFigures, HiveServices
from hivemind.daemon.cyclebook import CycleBook
from hivemind.daemon.outage import broken_cycle
from hivemind.daemon.runner import AgentRunner, RunOptions
from hivemind.daemon.status import RunTotals
from hivemind.daemon.worker_process import WorkerSpec
from hivemind.daemon.workers import (
    Outcome,
    WorkerLink,
    deal,
    process_count,
    share_of_calls,
    stop_all,
)
from hivemind.errors import WorkerCrashedError, WorkerLostError
from hivemind.hive.layout import Hive
from hivemind.hive.leftovers import sweep_temps
from hivemind.settings import HiveConfig

logger = logging.getLogger("hivemind.daemon.daemon")  # the daemon speaks, whichever part


def _deal_home(names: list[str], home: Collection[str], processes: int) -> list[list[str]]:
    """`deal`, the agents of `home` kept in the lead's share (the first), which the
    others fill up to an even share; no worker is left without an agent."""
    kept = [n for n in names if n in home]
    if not kept:
        return deal(names, processes)
    away = [n for n in names if n not in home]
    fill = max(0, -(-len(names) // max(1, processes)) - len(kept))
    rest = away[fill:]
    if processes < 2 or not rest:
        return [kept + away]
    return [kept + away[:fill], *(s for s in deal(rest, processes - 1) if s)]


class WorkerLead:
    """The daemon's dealings with its worker processes (`Daemon` inherits them)."""

    hive: Hive
    config: HiveConfig
    options: RunOptions
    services: HiveServices
    runners: dict[str, AgentRunner]
    totals: RunTotals
    book: CycleBook
    workers: list[WorkerLink]
    figures: HiveFigures
    stopping: asyncio.Event
    _hurry: asyncio.Event
    _secrets: tuple[str, ...]
    _worker_ends: set[asyncio.Task[None]]
    _deadline: float | None

    if TYPE_CHECKING:  # the daemon's own, used here
        def request_dispatch(self) -> None: ...
        def wake_agents(self, names: list[str]) -> None: ...

    def _spread(self, names: list[str], home: Collection[str] = ()) -> list[str]:
        """Deal the agents out over the processes and start the workers; returns the
        agents this process runs itself: those of `home` (agents naming MCP servers,
        whose pool runs here), and a share of the others."""
        wanted = self.options.workers or self.config.daemon.workers
        # Each process needs a model-call slot of its own, and together they keep the cap.
        processes = process_count(wanted, len(names), self.config.daemon.max_concurrent_calls)
        shares = _deal_home(names, home, processes)
        processes = len(shares)
        if processes > 1:
            calls = share_of_calls(self.config.daemon.max_concurrent_calls, processes)
            self.services.model_slots = asyncio.Semaphore(calls)
            for share in shares[1:]:
                spec = WorkerSpec(
                    root=str(self.hive.root), lead=os.getpid(), config=self.config,
                    offline=self.services.provider.offline, secrets=self._secrets,
                    agents=tuple(share), model_calls=calls,
                )
                link = WorkerLink(spec, on_dispatch=self.request_dispatch,
                                  on_mail=self.wake_agents, on_load=self._moved_elsewhere,
                                  on_late=self._finished_late, on_lost=self._worker_lost)
                link.start()  # from this thread, which lives as long as the daemon runs
                self.workers.append(link)
        return shares[0]

    def _moved_elsewhere(self, agent: str, delta: int, by: WorkerLink | None = None) -> None:
        """A worker moved one of its agents' tasks: the board's load follows, and a task
        leaving active/ makes room for the next one; the other workers are told."""
        self.services.board.moved_elsewhere(agent, delta)
        self._board_moved(agent, delta, by)
        if delta < 0:
            self.request_dispatch()

    def _board_moved(self, agent: str, delta: int, by: WorkerLink | None = None) -> None:
        """A task moved into or out of active/<agent>/ (a claim here, a worker's end): the
        figures in STATUS blocks follow at once, here and in every other worker."""
        self.figures.moved()
        for link in self.workers:
            if link is not by:
                link.tell_moved(agent, delta)

    async def _adopt(self, link: WorkerLink) -> None:
        """Mirror the recovered state of a worker's agents (counters, budgets) here."""
        try:
            states = await link.ready()
        except WorkerLostError:
            return  # its agents fall back to this process at their next cycle
        for name, state in states.items():
            runner = self.runners.get(name)
            if runner is not None:
                state.apply(runner.agent)

    def _finished_late(self, agent: Agent, outcome: Outcome) -> None:
        """A worker's cycle that ended after this process stopped waiting for it (its
        grace period ran out here first): it counts all the same, in the summary and
        status.json."""
        runner = self.runners.get(agent.name)
        if runner is None or runner.agent is not agent:  # the agent has left meanwhile
            if isinstance(outcome, CycleReport) and outcome.ran:
                self.totals.add(outcome)
            return
        if isinstance(outcome, WorkerCrashedError):
            report = self._crashed(runner, outcome)
        elif isinstance(outcome, Exception):
            report = broken_cycle(runner.agent, outcome)
        else:
            report = outcome
        self.book.after(runner, report)

    def _crashed(self, runner: AgentRunner, exc: WorkerCrashedError) -> CycleReport:
        """A bug ended the agent's cycle in its worker process: as in this one, that cycle
        fails (logged with the worker's traceback) and is retried after a back-off; the
        worker and its other agents go on."""
        logger.error(
            "%s: a cycle failed on a bug in hivemind (in worker process %s); it is retried "
            "after a back-off and the other agents go on (please report it)\n%s",
            runner.agent.name, exc.pid, exc.where.rstrip(),
        )
        return broken_cycle(runner.agent, exc.error)

    def _worker_lost(self, link: WorkerLink) -> None:
        """A worker's pipe closed: see to its end (off the pipe's callback)."""
        task = asyncio.ensure_future(self._worker_ended(link))
        self._worker_ends.add(task)
        task.add_done_callback(self._worker_ends.discard)

    async def _worker_ended(self, link: WorkerLink) -> None:
        """Once its process is gone: unless it ended as asked, say so once; unless it
        exited of itself, remove the temp files it left mid-write (the next start would,
        maybe days later)."""
        await link.ended()
        why = link.failure()  # None: as asked, or killed on the stop, which told of it
        agents = ", ".join(link.agents)
        if why is not None and self.stopping.is_set():
            logger.warning(
                "worker process %s ended while the daemon stopped (%s): the cycles of its "
                "agents %s still in flight are marked interrupted at the next start",
                link.pid, why, agents,
            )
        elif why is not None:
            logger.warning(
                "worker process %s ended (%s): its agents %s run in this process (pid %d) "
                "from now on", link.pid, why, agents, os.getpid(),
            )
        if link.process.exitcode != 0:  # killed or crashed: maybe in the middle of a write
            await asyncio.to_thread(sweep_temps, self.hive)

    async def _stop_workers(self) -> None:
        """Stop the workers with what is left of the grace period (all of it if the run
        ended without `_drain`), and the hurry; then see to those that died meanwhile."""
        loop = asyncio.get_running_loop()
        if self._deadline is None:
            self._deadline = loop.time() + self.config.daemon.grace_period
        await stop_all(self.workers, self._deadline - loop.time(), self._hurry)
        await asyncio.gather(*list(self._worker_ends))
