"""Worker processes: a hive's agents spread over several processes (`--workers N`).

One Python process runs one core. With `[daemon] workers = N` the daemon (the
lead) starts N-1 worker processes and deals the agents out among them and itself.
The lead keeps everything that decides: the hive lock, the watcher, dispatch and
claims, wake-ups, heartbeats, back-offs, status.json. A worker only runs the cycles
the lead asks for, one agent's cycle at a time, and says what they changed (tasks
moved, mail sent) so the lead dispatches and wakes the recipients at once. The
files are the state, so nothing else needs sharing: a claim is still one rename,
a delivery still one maildir link, whatever process makes it.

A worker that dies (killed, out of memory) hands its agents back: the lead marks
their interrupted cycles in the audit log and runs them itself from then on. A
lead that dies leaves its workers without a pipe: they finish the cycle in hand
and exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import multiprocessing
import os
import pickle
import signal
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal

from hivemind.agent.budget import BudgetTracker
from hivemind.agent.cycle import Agent, CycleReport
from hivemind.agent.services import HiveServices
from hivemind.daemon.gctune import daemon_gc_pace
from hivemind.errors import WorkerCrashedError, WorkerLostError
from hivemind.hive.layout import Hive
from hivemind.hive.models import HiveConfig
from hivemind.llm.base import Provider
from hivemind.llm.offline import OfflineProvider
from hivemind.llm.select import make_provider
from hivemind.ltm.store import LongTermMemory

AGENTS_PER_PROCESS = 16
"""With `workers = "auto"`, a process more for every this many agents, up to one per
core: offline, one process runs 16 agents' cycles with its core busy the whole time."""
FIGURES_TTL = 2.0  # as the lead's: hive figures in STATUS blocks are this fresh
STOP_TIMEOUT = 10.0  # seconds a worker has to exit once its cycles are done


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs to run its agents (sent to it once, pickled)."""

    root: str
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

    @classmethod
    def of(cls, agent: Agent) -> AgentState:
        # The lead shows the day's spending; the per-task ledger stays with the worker,
        # which is where budgets are enforced (and it grows with every task).
        budget = dataclasses.replace(agent.budget, per_task={})
        return cls(agent.cycle_no, agent.last_error, agent.config_error, budget)

    def apply(self, agent: Agent) -> None:
        agent.cycle_no = self.cycle_no
        agent.last_error = self.last_error
        agent.config_error = self.config_error
        agent.budget = self.budget


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def process_count(wanted: int | Literal["auto"], agents: int, max_calls: int) -> int:
    """How many processes run `agents` agents: `wanted`, or with "auto" one per core
    but one for every `AGENTS_PER_PROCESS` agents at most (a few agents never keep
    a core busy, and a process costs its memory and start-up). Each needs a
    model-call slot of its own, so never more than `max_calls`, nor than agents."""
    count = min(usable_cores(), -(-agents // AGENTS_PER_PROCESS)) if wanted == "auto" else wanted
    return max(1, min(count, agents, max_calls))


def deal(names: list[str], processes: int) -> list[list[str]]:
    """Agents dealt round-robin over `processes` (the lead's share first)."""
    return [names[k::processes] for k in range(max(1, processes))]


def share_of_calls(total: int, processes: int) -> int:
    """Each process's cap on concurrent model calls, so that together they keep `total`."""
    return max(1, total // max(1, processes))


# -- the lead's side ------------------------------------------------------------


@contextlib.contextmanager
def _main_left_out() -> Iterator[None]:
    """Start a spawned process without the parent's `__main__`.

    spawn runs the parent's main script again in each child, which a script without
    an `if __name__ == "__main__":` guard cannot survive (it would start a daemon of
    its own there). A worker needs nothing from it: its entry point and everything
    it is sent live in hivemind. The swap lasts as long as `Process.start` reads it.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class WorkerLink:
    """The lead's handle on one worker process: start, run a cycle there, stop."""

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        on_dispatch: Callable[[], None],
        on_mail: Callable[[list[str]], None],
        on_load: Callable[[str, int], None],
    ) -> None:
        self.spec = spec
        self.agents = spec.agents
        self.alive = False
        self._on_dispatch = on_dispatch
        self._on_mail = on_mail
        self._on_load = on_load
        context = multiprocessing.get_context("spawn")
        self._conn, self._child_conn = context.Pipe(duplex=True)
        self.process = context.Process(
            target=worker_main, args=(spec, self._child_conn),
            name=f"hivemind-worker-{spec.agents[0]}", daemon=True,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Future[dict[str, AgentState]] | None = None
        self._waiting: dict[int, tuple[Agent, asyncio.Future[CycleReport]]] = {}
        self._seq = itertools.count()

    def start(self) -> None:
        """Start the process; its agents' states arrive once it has recovered them."""
        self._loop = asyncio.get_running_loop()
        self._ready = self._loop.create_future()
        with _main_left_out():
            self.process.start()
        self._child_conn.close()
        self.alive = True
        self._loop.add_reader(self._conn.fileno(), self._readable)

    async def ready(self) -> dict[str, AgentState]:
        """The states of its agents once they are recovered (raises WorkerLostError)."""
        assert self._ready is not None, "start() first"
        return await asyncio.shield(self._ready)

    async def cycle(self, agent: Agent) -> CycleReport:
        """Run one cycle of `agent` in the worker; its state is mirrored into `agent`."""
        await self.ready()
        if not self.alive:
            raise WorkerLostError(f"the worker process of {agent.name} had ended")
        assert self._loop is not None
        seq = next(self._seq)
        future: asyncio.Future[CycleReport] = self._loop.create_future()
        self._waiting[seq] = (agent, future)
        self._send(("cycle", agent.name, seq))
        return await future

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self._conn.send(message)
        except OSError:
            self._lost("its pipe is closed")

    def _readable(self) -> None:
        try:
            while self._conn.poll():
                self._handle(self._conn.recv())
        except (EOFError, OSError):
            self._lost("it exited")

    def _handle(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "dispatch":
            self._on_dispatch()
        elif kind == "load":
            self._on_load(message[1], message[2])
        elif kind == "mail":
            self._on_mail(list(message[1]))
        elif kind == "ready":
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(dict(message[1]))
        elif kind in ("report", "broken", "crash"):
            agent, future = self._waiting.pop(message[1])
            message[3].apply(agent)
            if future.done():
                return
            if kind == "report":
                future.set_result(message[2])
            elif kind == "broken":
                future.set_exception(message[2])  # the OSError itself, pickled
            else:
                future.set_exception(WorkerCrashedError(f"agent {agent.name}: {message[2]}"))

    def _lost(self, why: str) -> None:
        if not self.alive:
            return
        self.alive = False
        if self._loop is not None:
            self._loop.remove_reader(self._conn.fileno())
        error = WorkerLostError(f"the worker process of {', '.join(self.agents)} ended: {why}")
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
        for _, future in self._waiting.values():
            if not future.done():
                future.set_exception(error)
        self._waiting.clear()

    async def stop(self) -> None:
        """Ask the worker to finish and exit (it finishes no new cycle: the lead drained
        its agents already); kill it if it does not exit in time."""
        if self.alive:
            self._send(("stop",))
        await asyncio.to_thread(self.process.join, STOP_TIMEOUT)
        if self.process.is_alive():
            self.process.kill()
            await asyncio.to_thread(self.process.join, STOP_TIMEOUT)
        self._lost("it was stopped")
        # Nobody waits for it now: a ready future that failed must not be reported unseen.
        if self._ready is not None and self._ready.done() and not self._ready.cancelled():
            self._ready.exception()
        self._conn.close()


# -- the worker's side -----------------------------------------------------------


def worker_main(spec: WorkerSpec, conn: Connection) -> None:
    """Entry point of a worker process."""
    # Ctrl-C reaches the whole process group: the lead decides when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with daemon_gc_pace():
        asyncio.run(_WorkerHost(spec, conn).run())


class _WorkerHost:
    """Runs the cycles the lead asks for until told to stop (or the lead is gone)."""

    def __init__(self, spec: WorkerSpec, conn: Connection) -> None:
        self.spec = spec
        self.conn = conn
        self.agents: dict[str, Agent] = {}
        self.cycles: set[asyncio.Task[None]] = set()
        self.stopping = asyncio.Event()
        self._figures: tuple[float, dict[str, object]] = (0.0, {})

    def _provider(self) -> Provider:
        return OfflineProvider() if self.spec.offline else make_provider(self.spec.config.provider)

    async def run(self) -> None:
        spec = self.spec
        hive = Hive(spec.root)
        config = spec.config.model_copy(deep=True)
        config.daemon.max_concurrent_calls = spec.model_calls
        services = HiveServices.open(hive, self._provider(), config, secrets=spec.secrets)
        services.roms.saves_last_good = True
        services.task_changed = lambda: self._send(("dispatch",))
        services.board.on_load_change = lambda agent, delta: self._send(("load", agent, delta))
        services.mail_sent = lambda names: self._send(("mail", list(names)))
        services.figures = lambda: self._board_figures(services)
        services.ltm = LongTermMemory(hive, config.memory, config.agents.retrieval)
        try:
            services.counter.warm()  # not in the first cycle
            for name in spec.agents:
                agent = self.agents[name] = Agent(name, services)
                agent.recover()
            self._send(("ready", {n: AgentState.of(a) for n, a in self.agents.items()}))
            loop = asyncio.get_running_loop()
            loop.add_reader(self.conn.fileno(), self._readable)
            await self.stopping.wait()
            loop.remove_reader(self.conn.fileno())
            if self.cycles:
                await asyncio.wait(self.cycles)
            await asyncio.gather(*(a.settle() for a in self.agents.values()))
        finally:
            await services.provider.aclose()
            services.ltm.close()
            with contextlib.suppress(OSError):
                self.conn.close()

    def _board_figures(self, services: HiveServices) -> dict[str, object]:
        at, figures = self._figures
        now = time.monotonic()
        if now - at > FIGURES_TTL:
            figures = services.board_figures()
            self._figures = (now, figures)
        return figures

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self.conn.send(message)
        except OSError:  # the lead is gone: finish what is in hand, then exit
            self.stopping.set()

    def _readable(self) -> None:
        try:
            while self.conn.poll():
                message = self.conn.recv()
                if message[0] == "cycle":
                    task = asyncio.ensure_future(self._cycle(message[1], message[2]))
                    self.cycles.add(task)
                    task.add_done_callback(self.cycles.discard)
                elif message[0] == "stop":
                    self.stopping.set()
        except (EOFError, OSError):
            self.stopping.set()

    async def _cycle(self, name: str, seq: int) -> None:
        agent = self.agents[name]
        try:
            report = await agent.cycle()
        except OSError as exc:
            self._send(("broken", seq, _portable(exc), AgentState.of(agent)))
        except Exception:
            self._send(("crash", seq, traceback.format_exc(), AgentState.of(agent)))
            self.stopping.set()
        else:
            self._send(("report", seq, report, AgentState.of(agent)))


def _portable(exc: OSError) -> OSError:
    """`exc` as it can cross the pipe (an OSError subclass whose arguments do not
    rebuild it when unpickled becomes a plain OSError with the same words)."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return OSError(exc.errno, f"{type(exc).__name__}: {exc}")
    return exc
