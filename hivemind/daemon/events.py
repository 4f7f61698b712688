"""The hive's changes as the daemon meets them: agents that come and go (each one's
loop started, a removed one's tasks given back once its cycle is over), tasks dropped,
mail, ROM edits and watched files that wake agents (a part of `Daemon`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from hivemind.agent.cycle import Agent
from hivemind.agent.perceive import matches_any
from hivemind.agent.services import HiveServices
from hivemind.daemon import outage
from hivemind.daemon.availability import Availability
from hivemind.daemon.cyclebook import CycleBook
from hivemind.daemon.diskfull import DiskGuard
from hivemind.daemon.dispatch_loop import DispatchLoop
from hivemind.daemon.mcphub import McpHub
from hivemind.daemon.pausing import PauseWatch
from hivemind.daemon.runner import AgentRunner, RunOptions
from hivemind.daemon.workers import WorkerLink
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.watcher import HiveEvent, HiveEventKind, HiveWatcher

logger = logging.getLogger("hivemind.daemon.daemon")  # the daemon speaks, whichever part


class HiveEvents:
    """The daemon's agents as they come and go, and what wakes them (`Daemon` inherits
    it)."""

    hive: Hive
    options: RunOptions
    services: HiveServices
    runners: dict[str, AgentRunner]
    disk: DiskGuard
    availability: Availability
    pauses: PauseWatch
    dispatching: DispatchLoop
    book: CycleBook
    mcp: McpHub
    stopping: asyncio.Event
    _agent_loops: set[asyncio.Task[None]]
    _retiring: dict[str, asyncio.Task[None]]

    if TYPE_CHECKING:  # the daemon's own, used here
        def request_dispatch(self) -> None: ...
        def wake_agents(self, names: list[str]) -> None: ...
        async def _agent_loop(self, runner: AgentRunner) -> None: ...

    def _wanted(self, name: str) -> bool:
        # Never HUMAN, the person's name: see `Hive.reserved_agent_folder`.
        return name != HUMAN and (self.options.agents is None or name in self.options.agents)

    def _start_agent(
        self, tg: asyncio.TaskGroup, name: str, worker: WorkerLink | None = None
    ) -> None:
        agent = Agent(name, self.services)
        if worker is None:
            self.disk.recover(agent)  # a worker recovers the agents it runs itself
        runner = AgentRunner(agent=agent, worker=worker)
        self.runners[name] = runner
        self.pauses.follow(runner)  # paused by a person: its tasks back, no cycle
        self.availability.forget()
        runner.wake.set()
        runner.task = tg.create_task(self._agent_loop(runner))
        self._agent_loops.add(runner.task)
        runner.task.add_done_callback(self._agent_loops.discard)

    async def _retire(
        self, name: str, runner: AgentRunner | None, tg: asyncio.TaskGroup
    ) -> None:
        """An agent left the hive: once its cycle in flight is over, the tasks it held go
        back to tasks/. If it is back meanwhile, its new runner starts only now: never
        two cycles of one agent at once, on the same tasks."""
        try:
            if runner is not None and runner.task is not None:
                await asyncio.wait([runner.task])
        finally:
            del self._retiring[name]
        if name in self.runners:
            return
        await self.mcp.detach(name)  # its servers stop unless another agent names them
        if not self.hive.rom_path(name).exists():
            self._give_back(name)
        elif self._wanted(name) and not self.stopping.is_set():
            self._start_agent(tg, name)
            self.request_dispatch()

    def _give_back(self, name: str) -> None:
        """The tasks claimed by `name`, an agent the hive no longer has, back to tasks/
        for the others (one assigned to it by name waits for it: see `Router`)."""
        released = outage.give_back(self.services, name)
        if released:
            logger.warning(
                "agent %s is gone (no %s): its tasks are back in tasks/ for the others: %s",
                name, self.hive.relative(self.hive.rom_path(name)), ", ".join(released),
            )
            self.request_dispatch()

    async def _event_loop(self, watcher: HiveWatcher, tg: asyncio.TaskGroup) -> None:
        while not self.stopping.is_set():
            event = await watcher.events.get()
            if self.stopping.is_set():
                break  # the stop came while it waited: `_drain` already has its runners
            self._handle(event, tg)

    def _handle(self, event: HiveEvent, tg: asyncio.TaskGroup) -> None:
        kind, name = event.kind, event.agent
        if kind is HiveEventKind.TASK_DROPPED:
            self.dispatching.changed_tasks.add(event.path)
            self.request_dispatch()
        elif kind is HiveEventKind.TASK_EDITED and name:
            # A person edited a task the agent holds: it sees the new text at its next
            # cycle. The board's own moves (a claim) leave a file it has read: no news.
            if not self.services.board.has_read(event.path):
                self.wake_agents([name])
        elif kind in (HiveEventKind.MAIL_ARRIVED, HiveEventKind.ROM_CHANGED) and name:
            outage.lift_pause(self.hive, self.runners.get(name))  # (an edit lifts a pause)
            self.wake_agents([name])
            if kind is HiveEventKind.ROM_CHANGED:
                # Routing may have changed (skills, accepts_unassigned): tasks no agent
                # took may have one now.
                self.availability.forget()
                self.request_dispatch()
        elif kind is HiveEventKind.AGENT_ADDED and name and self._wanted(name):
            self.availability.forget()
            # Never once stopping: `_drain` would not know of its runner, which would then
            # wait for a wake-up for ever, and the TaskGroup for it.
            if (name not in self.runners and name not in self._retiring
                    and not self.stopping.is_set()):
                self._start_agent(tg, name)  # (one still retiring starts after: `_retire`)
                self.request_dispatch()
        elif kind is HiveEventKind.AGENT_REMOVED and name:
            runner = self.runners.pop(name, None)
            self.availability.forget()
            if runner is not None:
                runner.stop = True
                runner.wake.set()
                self.book.freed.set()
            if name not in self._retiring:
                self._retiring[name] = tg.create_task(self._retire(name, runner, tg))
        elif kind is HiveEventKind.FILE_CHANGED:
            rel = self.hive.relative(event.path)
            for runner_name, runner in self.runners.items():
                cfg = runner.agent.config()
                if cfg is not None and matches_any(rel, cfg.watch):
                    self.wake_agents([runner_name])
