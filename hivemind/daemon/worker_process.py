"""A worker process of `hivemind run --workers N`: runs the cycles its lead asks for.

It recovers its share of the agents, says "ready" with their states, then runs each
cycle the lead asks for and reports it (tasks moved, mail sent, the cycle's report or
error) until the lead says stop: its cycles in flight then have the grace period the
lead gives, and are cut when it runs out, as the lead cuts its own. It dies with its
lead (see `worker_main`) and holds the workers lock while it lives (see `lock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import dataclasses
import logging
import math
import os
import pickle
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from hivemind.agent.budget import BudgetTracker
from hivemind.agent.cycle import Agent
from hivemind.agent.report import CycleReport
from hivemind.agent.services import HiveFigures, HiveServices
from hivemind.daemon.gctune import daemon_gc_pace
from hivemind.daemon.lock import hold_as_worker, keep_holding
from hivemind.hive.layout import Hive
from hivemind.llm.base import Provider
from hivemind.llm.offline import OfflineProvider
from hivemind.llm.select import make_provider
from hivemind.ltm.embeddings import configured_embedder
from hivemind.ltm.store import LongTermMemory
from hivemind.settings import HiveConfig

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent thread ends


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs to run its agents (sent to it once, pickled)."""

    root: str
    lead: int  # the lead's pid: a worker whose parent is another process has lost it
    config: HiveConfig
    offline: bool  # the offline provider; else the provider hive.toml and the env name
    secrets: tuple[str, ...]
    agents: tuple[str, ...]
    model_calls: int  # this process's share of `max_concurrent_calls`


@dataclass(frozen=True)
class AgentState:
    """What the lead mirrors of an agent a worker runs (for status and routing)."""

    cycle_no: int
    last_error: str | None
    config_error: str | None
    budget: BudgetTracker
    held: dict[str, Any]
    recorded: CycleReport | None = None  # of a cycle that crashed after its record

    @classmethod
    def of(cls, agent: Agent) -> AgentState:
        # The lead shows the day's spending; the per-task ledger stays with the worker,
        # which is where budgets are enforced (and it grows with every task).
        budget = dataclasses.replace(agent.budget, per_task={})
        return cls(agent.cycle_no, agent.last_error, agent.config_error, budget,
                   agent.held.status(), agent.recorded)

    def apply(self, agent: Agent) -> None:
        agent.cycle_no = self.cycle_no
        agent.last_error = self.last_error
        agent.config_error = self.config_error
        agent.budget = self.budget
        agent.recorded = self.recorded  # a crashed cycle's tokens count in the lead
        agent.held.mirrored = self.held


def worker_main(spec: WorkerSpec, conn: Connection) -> None:
    """Entry point of a worker process."""
    # Ctrl-C reaches the whole process group: the lead decides when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_lead()
    # Held until this process ends (see `lock`). Its lead must still be its parent once it
    # is held: a daemon started after the lead died waits for this worker from then on.
    held = hold_as_worker(Hive(spec.root))
    if held is None or os.getppid() != spec.lead:
        return  # the lead is gone already: its agents are not ours to run
    with daemon_gc_pace():
        asyncio.run(_WorkerHost(spec, conn, held).run())
    # Everything is on disk and the pipe is closed: skip the interpreter's teardown, which
    # takes most of a second with the model SDK loaded, while the lead waits for the exit.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _die_with_lead() -> None:
    """Have the kernel SIGKILL this process when the lead's thread that started it ends
    (Linux): a lead killed with -9 takes its workers with it at once."""
    if not sys.platform.startswith("linux"):
        return  # elsewhere, the closed pipe makes the worker cut its cycles and exit
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class _WorkerHost:
    """Runs the cycles the lead asks for until told to stop (or the lead is gone)."""

    def __init__(self, spec: WorkerSpec, conn: Connection, workers_lock: int) -> None:
        self.spec = spec
        self.hive = Hive(spec.root)
        self.conn = conn
        self.workers_lock = workers_lock  # the descriptor holding it (see `lock`)
        self.agents: dict[str, Agent] = {}
        self.cycles: set[asyncio.Task[None]] = set()
        self.stopping = asyncio.Event()
        self.deadline = math.inf  # (monotonic) when the cycles still in flight are cut
        self._deadline_moved = asyncio.Event()

    def _provider(self) -> Provider:
        return OfflineProvider() if self.spec.offline else make_provider(self.spec.config.provider)

    async def run(self) -> None:
        spec, hive = self.spec, self.hive
        config = spec.config.model_copy(deep=True)
        config.daemon.max_concurrent_calls = spec.model_calls
        services = HiveServices.open(hive, self._provider(), config, secrets=spec.secrets)
        services.roms.saves_last_good = True
        services.roms.tells_problems = False  # the lead reads every ROM too, and tells
        services.task_changed = lambda: self._send(("dispatch",))
        self.figures = figures = HiveFigures(services)
        self.board = services.board
        services.board.on_load_change = self._moved
        services.mail_sent = lambda names: self._send(("mail", list(names)))
        services.figures = figures
        services.ltm = LongTermMemory(hive, config.memory, config.agents.retrieval,
                                      configured_embedder(config.memory.embeddings))
        loop = asyncio.get_running_loop()
        try:
            services.counter.warm()  # not in the first cycle
            for name in spec.agents:
                agent = self.agents[name] = Agent(name, services)
                agent.recover()
            self._send(("ready", {n: AgentState.of(a) for n, a in self.agents.items()}))
            loop.add_reader(self.conn.fileno(), self._readable)
            await self.stopping.wait()
            await self._finish_cycles()
            await asyncio.gather(*(a.settle() for a in self.agents.values()))
        finally:
            with contextlib.suppress(OSError, ValueError):
                loop.remove_reader(self.conn.fileno())
            await services.provider.aclose()
            services.ltm.close()
            with contextlib.suppress(OSError):
                self.conn.close()

    async def _finish_cycles(self) -> None:
        """The cycles in flight go on until the deadline the lead set (its grace period;
        now, on a hurry or when the lead is gone); those still running then are cut as
        the lead cuts its own: no record, and the next start marks them interrupted."""
        while self.cycles and (left := self.deadline - time.monotonic()) > 0:
            self._deadline_moved.clear()
            moved = asyncio.ensure_future(self._deadline_moved.wait())
            try:
                await asyncio.wait([*self.cycles, moved], timeout=left,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                moved.cancel()
        for task in self.cycles:
            task.cancel()
        if self.cycles:
            await asyncio.wait(list(self.cycles))

    def _stop(self, grace: float) -> None:
        self.deadline = min(self.deadline, time.monotonic() + grace)
        self._deadline_moved.set()
        self.stopping.set()

    def _moved(self, agent: str, delta: int) -> None:
        """This worker moved a task into or out of active/<agent>/: the lead is told."""
        self.figures.moved()
        self._send(("load", agent, delta))

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self.conn.send(message)
        except OSError:  # the lead is gone: nobody will take this cycle's outcome
            self._stop(0.0)

    def _readable(self) -> None:
        try:
            while self.conn.poll():
                message = self.conn.recv()
                if message[0] == "cycle":
                    task = asyncio.ensure_future(self._cycle(message[1], message[2]))
                    self.cycles.add(task)
                    task.add_done_callback(self.cycles.discard)
                elif message[0] == "stop":
                    self._stop(message[1])
                elif message[0] == "look_again" and message[1] in self.agents:
                    self.agents[message[1]].seen.clear()  # resumed: see `pausing`
                elif message[0] == "load":  # a move made elsewhere (a claim by the lead)
                    self.board.moved_elsewhere(message[1], message[2])
                    self.figures.moved()
        except (EOFError, OSError):
            self._stop(0.0)  # the lead is gone (where the kernel did not kill us with it)

    async def _cycle(self, name: str, seq: int) -> None:
        agent = self.agents[name]
        self.workers_lock = keep_holding(self.hive, self.workers_lock)
        try:
            report = await agent.cycle()
        except asyncio.CancelledError:
            if agent.recorded is not None:  # cut after its record: counted as the lead's
                self._send(("report", seq, agent.recorded, AgentState.of(agent)))
            raise
        except OSError as exc:
            self._send(("broken", seq, _portable(exc), AgentState.of(agent)))
        except Exception as exc:  # a bug of ours: this cycle fails, not the worker
            crash = (_portable(exc), traceback.format_exc())
            self._send(("crash", seq, crash, AgentState.of(agent)))
        else:
            self._send(("report", seq, report, AgentState.of(agent)))


def _portable(exc: Exception) -> Exception:
    """`exc` as it can cross the pipe: one whose arguments do not rebuild it when
    unpickled becomes a plain OSError (or RuntimeError) with the same words."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        text = f"{type(exc).__name__}: {exc}"
        return OSError(exc.errno, text) if isinstance(exc, OSError) else RuntimeError(text)
    return exc
