"""`hivemind run`: the hive lock, one asyncio task per agent, the watcher, status.json.

Structured like anyio code: a TaskGroup owns every task; SIGINT/SIGTERM set
`stopping`, agents finish their in-flight cycle (within the grace period) and
every file is left consistent; `--until-idle` stops once nothing is left to do.
With `--workers N` some agents' cycles run in worker processes (see `workers`);
every decision stays here.

The daemon's parts: `events` (agents that come and go, what wakes them), `lead` (the
worker processes), `idle` (`--until-idle`); and what it holds: `Availability` (who
takes work), `DispatchLoop` (when tasks are claimed), `CycleBook` (each cycle's end),
`DiskGuard` (a full disk), `StatusWriter` (status.json).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable

from hivemind.agent.report import CycleReport
from hivemind.agent.services import HiveFigures, HiveServices
from hivemind.daemon import outage
from hivemind.daemon.availability import Availability
from hivemind.daemon.configwatch import read_hive_toml, watch_hive_toml
from hivemind.daemon.cyclebook import CycleBook
from hivemind.daemon.diskfull import DiskGuard
from hivemind.daemon.dispatch import Dispatcher
from hivemind.daemon.dispatch_loop import DispatchLoop
from hivemind.daemon.events import HiveEvents
from hivemind.daemon.gctune import daemon_gc_pace
from hivemind.daemon.idle import IdleState, IdleWatch
from hivemind.daemon.lead import WorkerLead
from hivemind.daemon.lock import HiveLock, outlive_old_workers
from hivemind.daemon.mcphub import McpHub
from hivemind.daemon.modelcheck import check_models
from hivemind.daemon.pausing import PauseWatch
from hivemind.daemon.runner import AgentRunner, RunOptions
from hivemind.daemon.status import RunSnapshot, StatusWriter
from hivemind.daemon.workers import WorkerLink
from hivemind.errors import WorkerCrashedError, WorkerLostError
from hivemind.hive.layout import Hive
from hivemind.hive.leftovers import restore_parked, sweep_temps
from hivemind.hive.watcher import HiveWatcher
from hivemind.llm.base import Provider
from hivemind.settings import AgentConfig, HiveConfig

logger = logging.getLogger(__name__)

__all__ = ["Daemon", "RunOptions"]

MCP_GRACE = 5.0
"""Seconds MCP servers have to stop cleanly at the daemon's end before they are killed."""


class Daemon(WorkerLead, IdleWatch, HiveEvents):
    """Runs the agents of one hive until stopped (or idle, with `until_idle`)."""

    def __init__(
        self,
        hive: Hive,
        config: HiveConfig,
        provider: Provider,
        options: RunOptions | None = None,
        *,
        secrets: tuple[str, ...] = (),
        on_cycle: Callable[[CycleReport], None] | None = None,
        hive_toml: bytes | None = None,
        trusted_as: Hive | None = None,
    ) -> None:
        self.hive = hive.ensure()
        self.config = config
        # hive.toml as `config` was read from it (see `read_hive_toml`; by default as it is
        # now), not as the watch finds it once it starts (after the lock, an earlier
        # daemon's workers, this one's): an edit made meanwhile is told too.
        self._hive_toml = read_hive_toml(hive) if hive_toml is None else hive_toml
        self.options = options or RunOptions()
        self.services = HiveServices.open(hive, provider, config, secrets=secrets)
        self.services.roms.saves_last_good = True  # an invalid edit then outlives a restart
        # The user's trust (a scratch copy's is the original's) lets MCP servers start.
        self.services.roms.trusted_as = trusted_as or self.hive
        self.mcp = McpHub(self.services, trusted_as or self.hive)
        self.services.task_changed = self.request_dispatch
        self.services.mail_sent = self.wake_agents
        self.services.figures = self.figures = HiveFigures(self.services)
        self.services.board.on_load_change = self._board_moved
        self.runners: dict[str, AgentRunner] = {}
        # `hivemind pause`, a ROM's `enabled: false` (see `pausing`)
        self.pauses = PauseWatch(self.hive, self.runners, routing_changed=self._routing_changed,
                                 give_back=lambda name: outage.give_back(self.services, name))
        self.disk = DiskGuard(hive, self.runners, self.options.backoff, self.request_dispatch)
        self.disk.open_store(self.services, config)  # on a full disk: once it has space
        self.availability = Availability(self.runners)
        self.dispatching = DispatchLoop(
            Dispatcher(self.services.board), self.availability, self.disk, self.runners,
            config.daemon, self.options, self.request_dispatch,
        )
        self.book = CycleBook(self.options, self.services, self.availability,
                              stop=self.stop, request_dispatch=self.request_dispatch,
                              on_cycle=on_cycle)
        self.totals = self.book.totals
        # Every agent's loop still running, a removed agent's too (it has left `runners`
        # but its cycle in flight goes on): a stop cuts them all at its grace period.
        self._agent_loops: set[asyncio.Task[None]] = set()
        self.stopping = asyncio.Event()
        self._hurry = asyncio.Event()  # a second signal: no grace for the cycles in flight
        self.exit_reason = ""
        self._in_flight = 0  # cycles running now
        self._quiet = asyncio.Event()  # set while none is
        self._quiet.set()
        self._last_activity = time.monotonic()
        self.status = StatusWriter(hive, self.snapshot)
        self.stalled: IdleState | None = None
        self.workers: list[WorkerLink] = []
        self._worker_ends: set[asyncio.Task[None]] = set()  # dead workers being seen to
        self._deadline: float | None = None  # (loop time) when the grace period ends
        self._secrets = secrets
        self._lock: HiveLock | None = None  # held while `run` runs
        self._retiring: dict[str, asyncio.Task[None]] = {}  # removed; tasks not yet given back

    # -- wiring ----------------------------------------------------------------
    @property
    def waiting(self) -> list[tuple[str, str]]:
        """The tasks no agent takes now, and why (the last dispatch's)."""
        return self.dispatching.waiting

    def request_dispatch(self) -> None:
        self.pauses.check_files()  # a pause made just now holds the agent's new work
        self.dispatching.wanted.set()
        self._last_activity = time.monotonic()

    def _routing_changed(self) -> None:
        """An agent paused or resumed: read the configs again, and dispatch."""
        self.availability.forget()
        self.request_dispatch()

    def wake_agents(self, names: list[str]) -> None:
        for name in names:
            runner = self.runners.get(name)
            if runner is not None:
                runner.wake.set()
        self._last_activity = time.monotonic()

    def snapshot(self) -> RunSnapshot:
        """What status.json says of the run now (see `StatusWriter`)."""
        return RunSnapshot(
            provider=self.services.provider.name, stopped_because=self.exit_reason,
            runners=self.runners, workers=self.workers, waiting=self.waiting,
            disk_full=self.disk.problem, totals=self.totals, mcp=self.mcp.states(),
        )

    # -- main ------------------------------------------------------------------
    async def run(self) -> str:
        """Run until stopped; returns why it stopped ("idle", "signal", "max-cycles", ...)."""
        with HiveLock(self.hive) as self._lock, daemon_gc_pace():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(sig, self.stop, "signal")
            try:
                # No agent runs here while a worker of an earlier daemon still runs it.
                if await outlive_old_workers(self.hive, self.stopping):
                    sweep_temps(self.hive)  # under the lock: no other daemon writes here
                    restore_parked(self.hive)
                    for unrun in self.hive.unrun_agent_folders():
                        logger.warning("%s", unrun)
                    known = set(self.hive.agent_names())
                    for name in self.services.board.active_agents():
                        if name not in known:
                            self._give_back(name)
                    await self._run()
            finally:
                try:
                    await self._stop_workers()
                    await self.mcp.aclose(min(self.config.daemon.grace_period, MCP_GRACE))
                    await asyncio.gather(*(r.agent.settle() for r in self.runners.values()))
                    await self.services.provider.aclose()
                    if self.services.ltm is not None:
                        self.services.ltm.close()
                finally:
                    self.status.write(final=True)
                    # Only now: a Ctrl-C while the workers stop hurries them, where it
                    # would raise KeyboardInterrupt (no summary, a stale status.json).
                    for sig in (signal.SIGINT, signal.SIGTERM):
                        with contextlib.suppress(NotImplementedError, RuntimeError):
                            loop.remove_signal_handler(sig)
        return self.exit_reason

    def stop(self, reason: str) -> None:
        """Stop after the cycles in flight (at most the grace period); a second signal
        (Ctrl-C again) cuts them short at once."""
        if not self.stopping.is_set():
            self.exit_reason = reason
            self.stopping.set()
            self.book.freed.set()  # agents waiting for a cycle of --max-cycles: stop
            self.dispatching.dispatched.set()  # agents waiting for the first dispatch: stop
            if reason == "signal" and self._in_flight:
                logger.warning(
                    "stopping: %d cycle(s) in flight may take up to %g s to finish; "
                    "Ctrl-C again stops at once (they are marked interrupted)",
                    self._in_flight, self.config.daemon.grace_period,
                )
        elif reason == "signal":
            self._hurry.set()

    async def _run(self) -> None:
        d = self.config.daemon
        poll = d.poll if self.options.poll is None else self.options.poll
        configs = self._start_configs()
        watch_globs = sorted({g for r in configs.values() for g in r.watch})
        # An unknown model is said before the first call (its list asked for meanwhile).
        checking = asyncio.ensure_future(check_models(
            self.hive, self.config, self.services.provider, self.services.roms))
        # The tokenizer loads (in a thread) while the workers start, not in a cycle.
        warming = asyncio.ensure_future(asyncio.to_thread(self.services.counter.warm))
        # Workers first: their start-up (a new interpreter) overlaps the watcher's.
        try:
            mine = self._spread([n for n in self.hive.agent_names() if self._wanted(n)],
                                home={n for n, c in configs.items() if c.mcp})
        finally:
            await warming
            await checking  # never raises; a few seconds at most (LIST_TIMEOUT)
        async with HiveWatcher(
            self.hive, settle_time=d.settle_time, rescan_interval=d.rescan_interval,
            poll=poll, watch_globs=watch_globs,
        ) as watcher, asyncio.TaskGroup() as tg:
            for name in mine:
                self._start_agent(tg, name)
            for link in self.workers:
                for name in link.agents:
                    self._start_agent(tg, name, link)
            self.request_dispatch()
            service = [
                *(tg.create_task(self._adopt(link)) for link in self.workers),
                tg.create_task(self.dispatching.run(self.stopping, self._quiet)),
                tg.create_task(self._event_loop(watcher, tg)),
                tg.create_task(self.status.loop()),
                tg.create_task(self.disk.loop()),
                tg.create_task(self.pauses.loop()),
                tg.create_task(watch_hive_toml(
                    self.hive, self._hive_toml, self.stopping,
                    self.config.daemon.rescan_interval, self._each_rescan,
                )),
            ]
            if self.options.until_idle:
                service.append(tg.create_task(self._idle_loop()))
            await self.stopping.wait()
            await self._drain(service)

    def _start_configs(self) -> dict[str, AgentConfig]:
        out = {}
        for name in self.hive.agent_names():
            with contextlib.suppress(Exception):
                out[name] = self.services.roms.load(name)
        return out

    async def _drain(self, service: list[asyncio.Task[None]]) -> None:
        """Let in-flight cycles finish (grace period), then cancel the rest; the workers'
        cycles have the same grace period, and the same hurry (see `_stop_workers`)."""
        for runner in self.runners.values():
            runner.stop = True
            runner.wake.set()
        pending = set(self._agent_loops)
        loop = asyncio.get_running_loop()
        self._deadline = deadline = loop.time() + self.config.daemon.grace_period
        for link in self.workers:
            link.stop(self.config.daemon.grace_period)
        hurry = asyncio.ensure_future(self._hurry.wait())
        try:
            while pending and not hurry.done() and (left := deadline - loop.time()) > 0:
                done, _ = await asyncio.wait([*pending, hurry], timeout=left,
                                             return_when=asyncio.FIRST_COMPLETED)
                pending -= done
        finally:
            hurry.cancel()
        if self._hurry.is_set():
            for link in self.workers:
                link.hurry()
        for t in pending:
            t.cancel()
        for t in service:
            t.cancel()

    # -- loops -----------------------------------------------------------------
    async def _agent_loop(self, runner: AgentRunner) -> None:
        # No agent wakes before the pending tasks are claimed.
        await self.dispatching.dispatched.wait()
        while not runner.stop:
            if runner.retry_at:
                # A failed cycle is retried after its back-off, whatever wakes us meanwhile;
                # only a stop (the agent's or the daemon's: see `_drain`) ends it sooner.
                while not runner.stop and (delay := runner.retry_at - time.monotonic()) > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(runner.wake.wait(), timeout=delay)
                    runner.wake.clear()  # the cycle after the back-off sees what came
                runner.retry_at = 0.0
            else:
                cfg = runner.agent.config()
                heartbeat = cfg.heartbeat if cfg is not None and cfg.heartbeat > 0 else None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(runner.wake.wait(), timeout=heartbeat)
            paused = runner.model_pause is not None or runner.steer_pause is not None
            if paused and not runner.stop:
                runner.wake.clear()  # no cycle until resumed (see `_handle`, `pausing`)
                continue
            if runner.stop or not await self._take_cycle(runner):
                break
            runner.wake.clear()
            runner.busy = True
            self._in_flight += 1
            self._quiet.clear()
            try:
                report = await self._cycle(runner)
            except asyncio.CancelledError:
                # Cut by the stop: a cycle already recorded in the audit log is counted
                # (the summary's cycles are the log's), one cut before its record is not.
                if runner.worker is None and runner.agent.recorded is not None:
                    self.book.count(runner.agent.recorded)
                raise
            except OSError as exc:
                report = self._broken_cycle(runner, exc)
            except Exception as exc:  # a bug of ours: this agent's cycle fails, not the hive
                logger.exception("%s: a cycle failed on a bug in hivemind; it is retried "
                                 "after a back-off and the other agents go on (please "
                                 "report it)", runner.agent.name)
                report = self._broken_cycle(runner, exc)
            finally:
                runner.busy = False
                self._in_flight -= 1
                if not self._in_flight:
                    self._quiet.set()
            self.book.after(runner, report)
            self.pauses.give_back(runner)  # paused during the cycle: its tasks go back now

    async def _take_cycle(self, runner: AgentRunner) -> bool:
        """Wait for a cycle of --max-cycles (see `CycleBook.take`), and while the disk is
        full. False on a stop."""
        return (await self.book.take(runner, self.stopping)
                and await self.disk.room(self.stopping))

    async def _cycle(self, runner: AgentRunner) -> CycleReport:
        """One cycle, here or in the agent's worker process."""
        worker = runner.worker
        await self.mcp.sync(runner.agent.name, runner.agent.config(), here=worker is None)
        if worker is not None:
            try:
                return await worker.cycle(runner.agent)
            except WorkerCrashedError as exc:
                return self._crashed(runner, exc)
            except WorkerLostError:
                if not self.stopping.is_set():
                    # Its worker died: once its process is surely gone, the agent comes
                    # home, its interrupted cycle marked, and runs here from now on.
                    await worker.ended()
                    runner.worker = None
                    runner.agent.recover()
            if self.stopping.is_set():
                # No new cycle (no new model call) on the way out: the one its worker had
                # in hand was cut, and the next start marks it interrupted.
                return CycleReport(agent=runner.agent.name, reason="the daemon is stopping")
        return await runner.agent.cycle()

    def _broken_cycle(self, runner: AgentRunner, exc: Exception) -> CycleReport:
        """The filesystem or a bug failed a cycle (see `broken_cycle`); a full disk
        pauses every agent until space is back."""
        self.disk.saw(exc)
        return outage.broken_cycle(runner.agent, exc)

    def _each_rescan(self) -> None:
        """Every rescan interval: the lock's pid file back if someone removed it; after a
        `hivemind trust` or an edit of a script a server runs, the agents naming MCP
        servers wake (a cycle first syncs them);
        a paused agent's servers are released."""
        if self._lock is not None:
            self._lock.refresh()
        if self.mcp.trust_changed():
            self.wake_agents([name for name, r in self.runners.items() if r.worker is None])
        elif changed := self.mcp.files_changed():  # a script a server runs, edited
            self.wake_agents(changed)
        # A paused agent's servers stop (unless another names them) until it resumes.
        self.mcp.release(n for n, r in self.runners.items()
                         if r.steer_pause is not None and not r.busy)
