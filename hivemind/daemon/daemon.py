"""`hivemind run`: the hive lock, one asyncio task per agent, the watcher, status.json.

Structured like anyio code: a TaskGroup owns every task; SIGINT/SIGTERM set
`stopping`, agents finish their in-flight cycle (within the grace period) and
every file is left consistent; `--until-idle` stops once nothing is left to do.
With `--workers N` some agents' cycles run in worker processes (see `workers`);
every decision stays here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path

from hivemind.agent.cycle import Agent
from hivemind.agent.pause import DAY_SPENT
from hivemind.agent.perceive import matches_any
from hivemind.agent.report import CycleReport
from hivemind.agent.services import HiveFigures, HiveServices
from hivemind.clock import utcnow
from hivemind.daemon import outage
from hivemind.daemon.configwatch import read_hive_toml, watch_hive_toml
from hivemind.daemon.diskfull import DiskGuard
from hivemind.daemon.dispatch import Dispatcher
from hivemind.daemon.gctune import daemon_gc_pace
from hivemind.daemon.idle import IdleWatch
from hivemind.daemon.lead import WorkerLead
from hivemind.daemon.lock import HiveLock, outlive_old_workers
from hivemind.daemon.runner import AgentRunner, RunOptions
from hivemind.daemon.status import IdleState, RunSnapshot, RunTotals, StatusWriter
from hivemind.daemon.workers import WorkerLink
from hivemind.errors import WorkerCrashedError, WorkerLostError
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.leftovers import sweep_temps
from hivemind.hive.watcher import HiveEvent, HiveEventKind, HiveWatcher
from hivemind.llm.base import Provider
from hivemind.settings import AgentConfig, HiveConfig

logger = logging.getLogger(__name__)

__all__ = ["Daemon", "RunOptions"]

CONFIGS_TTL = 1.0  # routing re-reads the ROMs at least this often
FULL_DISPATCH_EVERY = 12  # rescan intervals between full listings of tasks/ by dispatch
DISPATCH_COALESCE = 0.005  # s a dispatch waits, cycles in flight, to take their ends together


class Daemon(WorkerLead, IdleWatch):
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
        self.services.task_changed = self.request_dispatch
        self.services.mail_sent = self.wake_agents
        self.services.figures = self.figures = HiveFigures(self.services)
        self.services.board.on_load_change = self._board_moved
        self.runners: dict[str, AgentRunner] = {}
        self.disk = DiskGuard(hive, self.runners, self.options.backoff, self.request_dispatch)
        self.disk.open_store(self.services, config)  # on a full disk: once it has space
        self.dispatcher = Dispatcher(self.services.board)
        # Every agent's loop still running, a removed agent's too (it has left `runners`
        # but its cycle in flight goes on): a stop cuts them all at its grace period.
        self._agent_loops: set[asyncio.Task[None]] = set()
        self.totals = RunTotals()
        self.stopping = asyncio.Event()
        self._hurry = asyncio.Event()  # a second signal: no grace for the cycles in flight
        self.exit_reason = ""
        self._dispatch_wanted = asyncio.Event()
        self._dispatched = asyncio.Event()  # start-up's first dispatch is done (or a stop)
        self._in_flight = 0  # cycles running now
        self._quiet = asyncio.Event()  # set while none is
        self._quiet.set()
        self._changed_tasks: set[Path] = set()  # task files named by the watcher
        self._full_dispatch_at = 0.0  # when tasks/ is next listed whole
        self._configs_cache: dict[str, AgentConfig] | None = None
        self._unfinishing: set[str] = set()  # agents whose tools cannot end a task
        self._configs_at = 0.0
        self._on_cycle = on_cycle
        self._last_activity = time.monotonic()
        self.status = StatusWriter(hive, self.snapshot)
        self.waiting: list[tuple[str, str]] = []
        self.stalled: IdleState | None = None
        self.workers: list[WorkerLink] = []
        self._worker_ends: set[asyncio.Task[None]] = set()  # dead workers being seen to
        self._deadline: float | None = None  # (loop time) when the grace period ends
        self._secrets = secrets
        self._lock: HiveLock | None = None  # held while `run` runs
        self._retiring: dict[str, asyncio.Task[None]] = {}  # removed; tasks not yet given back
        self._cycles_taken = 0  # cycles running or run (for --max-cycles)
        self._cycle_freed = asyncio.Event()  # one of them did not run after all, or a stop

    # -- wiring ----------------------------------------------------------------
    def request_dispatch(self) -> None:
        self._dispatch_wanted.set()
        self._last_activity = time.monotonic()

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
            disk_full=self.disk.problem, totals=self.totals,
        )

    def _wanted(self, name: str) -> bool:
        # Never HUMAN, the person's name: see `Hive.reserved_agent_folder`.
        return name != HUMAN and (self.options.agents is None or name in self.options.agents)

    def _configs(self) -> dict[str, AgentConfig]:
        """Each running agent's config, for routing: read again when a ROM event comes,
        an agent comes or goes, or after CONFIGS_TTL (edits the watcher missed)."""
        now = time.monotonic()
        if self._configs_cache is None or now >= self._configs_at + CONFIGS_TTL:
            out = {}
            paused = self._paused()
            self._unfinishing = set()
            for name, runner in self.runners.items():
                if name in paused:
                    continue  # its daily budget is spent: tasks for it wait, others go on
                cfg = runner.agent.config()
                if cfg is not None and not cfg.finishes_tasks:
                    self._unfinishing.add(name)  # a task it took would never end
                elif cfg is not None:
                    out[name] = cfg
            self._configs_cache, self._configs_at = out, now
        return self._configs_cache

    def forget_configs(self) -> None:
        """Routing changed (an agent paused or resumed): read the configs and dispatch."""
        self._configs_cache = None
        self.request_dispatch()

    def _away(self) -> dict[str, str]:
        """Why agents that run take no work now, for the waiting list (after `_configs`)."""
        away = {n: "is paused: " + (self.runners[n].model_pause or "its daily token budget "
                                   "is spent") for n in self._paused()}
        away.update(dict.fromkeys(
            self._unfinishing,
            "cannot finish a task: its ROM's tools: allow neither complete_task nor fail_task",
        ))
        return away

    def _paused(self) -> set[str]:
        """The agents paused: their daily budget is spent today, or the model API refused
        their key or model (see `_after_cycle`)."""
        today = utcnow().date()
        return {n for n, r in self.runners.items() if r.paused_on == today or r.model_pause}

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
            self._cycle_freed.set()  # agents waiting for a cycle of --max-cycles: stop
            self._dispatched.set()  # agents waiting for the first dispatch: stop
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
        watch_globs = sorted({g for r in self._start_configs().values() for g in r.watch})
        # The tokenizer loads (in a thread) while the workers start, not in a cycle.
        warming = asyncio.ensure_future(asyncio.to_thread(self.services.counter.warm))
        # Workers first: their start-up (a new interpreter) overlaps the watcher's.
        try:
            mine = self._spread([n for n in self.hive.agent_names() if self._wanted(n)])
        finally:
            await warming
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
                tg.create_task(self._dispatch_loop()),
                tg.create_task(self._event_loop(watcher, tg)),
                tg.create_task(self.status.loop()),
                tg.create_task(self.disk.loop()),
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

    def _start_agent(
        self, tg: asyncio.TaskGroup, name: str, worker: WorkerLink | None = None
    ) -> None:
        agent = Agent(name, self.services)
        if worker is None:
            self.disk.recover(agent)  # a worker recovers the agents it runs itself
        runner = AgentRunner(agent=agent, worker=worker)
        self.runners[name] = runner
        self._configs_cache = None
        runner.wake.set()
        runner.task = tg.create_task(self._agent_loop(runner))
        self._agent_loops.add(runner.task)
        runner.task.add_done_callback(self._agent_loops.discard)

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
        await self._dispatched.wait()  # no agent wakes before the pending tasks are claimed
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
            if runner.model_pause is not None and not runner.stop:
                runner.wake.clear()  # no cycle until its ROM is edited (see `_handle`)
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
                    self._count(runner.agent.recorded)
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
            self._after_cycle(runner, report)

    async def _take_cycle(self, runner: AgentRunner) -> bool:
        """With --max-cycles N: wait while N cycles are running or have run (one that
        finds nothing new does not count); and while the disk is full. False on a stop."""
        limit = self.options.max_cycles
        while limit is not None and self._cycles_taken >= limit:
            if runner.stop or self.stopping.is_set():
                return False
            self._cycle_freed.clear()
            await self._cycle_freed.wait()
        self._cycles_taken += 1
        return await self.disk.room(self.stopping)

    async def _cycle(self, runner: AgentRunner) -> CycleReport:
        """One cycle, here or in the agent's worker process."""
        worker = runner.worker
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
        if not self.hive.rom_path(name).exists():
            self._give_back(name)
        elif self._wanted(name) and not self.stopping.is_set():
            self._start_agent(tg, name)
            self.request_dispatch()

    def _give_back(self, name: str) -> None:
        """The tasks claimed by `name`, an agent the hive no longer has, back to tasks/
        for the others (an assignee with no agent is routed as if unassigned)."""
        released = outage.give_back(self.services, name)
        if released:
            logger.warning(
                "agent %s is gone (no %s): its tasks are back in tasks/ for the others: %s",
                name, self.hive.relative(self.hive.rom_path(name)), ", ".join(released),
            )
            self.request_dispatch()

    def _broken_cycle(self, runner: AgentRunner, exc: Exception) -> CycleReport:
        """The filesystem or a bug failed a cycle (see `broken_cycle`); a full disk
        pauses every agent until space is back."""
        self.disk.saw(exc)
        return outage.broken_cycle(runner.agent, exc)

    def _count(self, report: CycleReport) -> None:
        self.totals.add(report)
        if self._on_cycle is not None:
            self._on_cycle(report)

    def _after_cycle(self, runner: AgentRunner, report: CycleReport) -> None:
        paused_on = utcnow().date() if report.reason == DAY_SPENT else None
        if paused_on != runner.paused_on and (report.ran or paused_on is not None):
            runner.paused_on = paused_on  # routing changes: no new work for it, or again
            self._configs_cache = None
            self.request_dispatch()  # and the waiting list says why tasks wait
        if not report.ran:
            self.totals.tasks_failed += report.tasks_failed  # failed by its budget
            self._cycles_taken -= 1  # nothing new: it did not count as a cycle
            self._cycle_freed.set()
            return
        self._count(report)
        if self.options.max_cycles is not None and self.totals.cycles >= self.options.max_cycles:
            self.stop("max-cycles")  # failed cycles count: each may have cost tokens
        if outage.pause_if_refused(self.services, runner, report):
            self.forget_configs()
        if outage.schedule_retry(runner, report, self.options.backoff):
            return
        if report.followup:  # held work that waits on nothing: on at once
            runner.wake.set()
        self._last_activity = time.monotonic()
        self.request_dispatch()  # tasks finished: others may be claimable now

    async def _dispatch_loop(self) -> None:
        settle_again: asyncio.TimerHandle | None = None
        while not self.stopping.is_set():
            await self._dispatch_wanted.wait()
            self._dispatch_wanted.clear()
            now = time.monotonic()
            changed: set[Path] | None = self._changed_tasks
            self._changed_tasks = set()
            if now >= self._full_dispatch_at:
                # Now and then, list tasks/ whole. The watcher's own rescan already turns
                # whatever the OS did not report into events; this is the last resort.
                changed = None
                interval = self.config.daemon.rescan_interval * FULL_DISPATCH_EVERY
                self._full_dispatch_at = now + interval
            try:
                configs = self._configs()
                result = self.dispatcher.dispatch(configs, changed, self._away())
            except OSError as exc:
                self._dispatched.set()
                self.disk.saw(exc)  # (a .reason file that does not fit): the hive waits
                self._full_dispatch_at = 0.0
                # The board itself is broken (e.g. tasks/active/<agent> is a file): say so
                # in status.json and look again later, without counting as activity.
                self.waiting = [("(board)", f"tasks cannot be moved: {exc}")]
                asyncio.get_running_loop().call_later(
                    self.options.backoff, self._dispatch_wanted.set
                )
                continue
            self._dispatched.set()
            for name in result.claimed:
                self.runners[name].wake.set()
            self.waiting = self.disk.waiting(result.waiting)
            if settle_again is not None:
                settle_again.cancel()
                settle_again = None
            if self.services.board.unsettled:
                # Files still being written: no event will come for them if they were
                # already there at start-up, so look again once they can have settled.
                settle_again = asyncio.get_running_loop().call_later(
                    self.services.board.settle_wait, self.request_dispatch
                )
            if self._in_flight:
                # Cycles in flight: their ends come in bursts; take them in one scan. Once
                # none is left, nothing more is coming: the next request is served at once.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._quiet.wait(), DISPATCH_COALESCE)

    def _each_rescan(self) -> None:
        """Every rescan interval: the lock's pid file back if someone removed it."""
        if self._lock is not None:
            self._lock.refresh()

    async def _event_loop(self, watcher: HiveWatcher, tg: asyncio.TaskGroup) -> None:
        while not self.stopping.is_set():
            event = await watcher.events.get()
            if self.stopping.is_set():
                break  # the stop came while it waited: `_drain` already has its runners
            self._handle(event, tg)

    def _handle(self, event: HiveEvent, tg: asyncio.TaskGroup) -> None:
        kind, name = event.kind, event.agent
        if kind is HiveEventKind.TASK_DROPPED:
            self._changed_tasks.add(event.path)
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
                self._configs_cache = None
                self.request_dispatch()
        elif kind is HiveEventKind.AGENT_ADDED and name and self._wanted(name):
            self._configs_cache = None
            # Never once stopping: `_drain` would not know of its runner, which would then
            # wait for a wake-up for ever, and the TaskGroup for it.
            if (name not in self.runners and name not in self._retiring
                    and not self.stopping.is_set()):
                self._start_agent(tg, name)  # (one still retiring starts after: `_retire`)
                self.request_dispatch()
        elif kind is HiveEventKind.AGENT_REMOVED and name:
            runner = self.runners.pop(name, None)
            self._configs_cache = None
            if runner is not None:
                runner.stop = True
                runner.wake.set()
                self._cycle_freed.set()
            if name not in self._retiring:
                self._retiring[name] = tg.create_task(self._retire(name, runner, tg))
        elif kind is HiveEventKind.FILE_CHANGED:
            rel = self.hive.relative(event.path)
            for runner_name, runner in self.runners.items():
                cfg = runner.agent.config()
                if cfg is not None and matches_any(rel, cfg.watch):
                    self.wake_agents([runner_name])
