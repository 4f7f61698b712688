"""Worker processes: a hive's agents spread over several processes (`--workers N`).

One Python process runs one core. With `[daemon] workers = N` the daemon (the
lead) starts N-1 worker processes and deals the agents out among them and itself.
The lead keeps everything that decides: the hive lock, the watcher, dispatch and
claims, wake-ups, heartbeats, back-offs, status.json. A worker only runs the cycles
the lead asks for, one agent's cycle at a time, and says what they changed (tasks
moved, mail sent) so the lead dispatches and wakes the recipients at once. The
files are the state, so nothing else needs sharing: a claim is still one rename,
a delivery still one maildir link, whatever process makes it.

A worker that dies (killed, out of memory) hands its agents back: the lead says so,
marks their interrupted cycles in the audit log and runs them itself from then on.
A stop reaches the workers as it reaches the lead's own agents: their cycles in
flight have the same grace period, a second Ctrl-C cuts them at once, and a worker
still there a moment after that is killed. A worker dies with its lead (on Linux the
kernel kills it; elsewhere its pipe closes and it cuts its cycles and exits), and
holds the workers lock (see `lock`) while it lives: a daemon started after a killed
one waits for it instead of running its agents a second time beside it.

This module is the lead's side; `worker_process` is the worker's.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import signal
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, Literal

from hivemind.agent.cycle import Agent
from hivemind.agent.report import CycleReport
from hivemind.daemon.status_file import WorkerStatus
from hivemind.daemon.worker_process import AgentState, WorkerSpec, worker_main
from hivemind.errors import WorkerCrashedError, WorkerLostError

logger = logging.getLogger(__name__)

AGENTS_PER_PROCESS = 16
"""With `workers = "auto"`, a process more for every this many agents, up to one per
core: offline, one process runs 16 agents' cycles with its core busy the whole time."""
STOP_MARGIN = 2.0  # s a worker has past the grace period (or a hurry) to exit, then killed
LINGER = 2.0  # s a worker whose pipe closed has to exit before it is killed
EXIT_POLL = 0.02  # s between two looks at whether a worker process has exited


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


Outcome = CycleReport | Exception  # how a worker's cycle ended: its report, or its error


class WorkerLink:
    """The lead's handle on one worker process: start, run a cycle there, stop."""

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        on_dispatch: Callable[[], None],
        on_mail: Callable[[list[str]], None],
        on_load: Callable[[str, int, WorkerLink], None],
        on_late: Callable[[Agent, Outcome], None],
        on_lost: Callable[[WorkerLink], None],
    ) -> None:
        self.agents = spec.agents
        self.alive = False  # its pipe is open
        self.killed = False  # by the lead, which had waited long enough for it to stop
        self._killed_for: str | None = None  # a failure of its own the kill ended (`ended`)
        self._stop_sent = False
        self._closed_unasked = False  # its pipe closed before it was asked to stop
        self._hurried = False
        self._on_dispatch = on_dispatch
        self._on_mail = on_mail
        self._on_load = on_load
        self._on_late = on_late
        self._on_lost = on_lost
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

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def start(self) -> None:
        """Start the process; its agents' states arrive once it has recovered them.

        Call it from the thread that runs the lead's loop: the kernel kills the worker
        when the thread that started it ends (PR_SET_PDEATHSIG), so that thread must
        live as long as the lead does.
        """
        self._loop = asyncio.get_running_loop()
        self._ready = self._loop.create_future()
        try:
            with _main_left_out():
                self.process.start()
        except BaseException:
            self._conn.close()  # no worker: nobody will ever close it
            raise
        finally:
            self._child_conn.close()  # the worker's end: a started worker has its own
        self.alive = True
        self._loop.add_reader(self._conn.fileno(), self._readable)

    async def ready(self) -> dict[str, AgentState]:
        """The states of its agents once they are recovered (raises WorkerLostError)."""
        assert self._ready is not None, "start() first"
        return await asyncio.shield(self._ready)

    async def cycle(self, agent: Agent) -> CycleReport:
        """Run one cycle of `agent` in the worker; its state is mirrored into `agent`.
        Raises the cycle's OSError, WorkerCrashedError for a bug, WorkerLostError if the
        worker has ended or is stopping."""
        await self.ready()
        if not self.alive or self._stop_sent:
            raise WorkerLostError(f"the worker process of {agent.name} had ended or is stopping")
        assert self._loop is not None
        seq = next(self._seq)
        future: asyncio.Future[CycleReport] = self._loop.create_future()
        self._waiting[seq] = (agent, future)
        self._send(("cycle", agent.name, seq))
        return await future

    def tell_moved(self, agent: str, delta: int) -> None:
        """Tell the worker a task moved into (+1) or out of (-1) active/<agent>/ elsewhere
        (a claim by the lead, another worker's end), before the cycle that may see it.
        Not before it is ready: it lists the board itself as it starts."""
        ready = self._ready is not None and self._ready.done()
        if ready and self.alive and not self._stop_sent:
            self._send(("load", agent, delta))

    def look_again(self, agent: str) -> None:
        """Have the worker's `agent` forget what it has seen, so that its next cycle runs
        on what is there (it was paused, and `hivemind resume` lifted the pause)."""
        if self.alive and not self._stop_sent:
            self._send(("look_again", agent))

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
            self._on_load(message[1], message[2], self)
        elif kind == "mail":
            self._on_mail(list(message[1]))
        elif kind == "ready":
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(dict(message[1]))
        elif kind in ("report", "broken", "crash"):
            agent, future = self._waiting.pop(message[1])
            message[3].apply(agent)
            if kind == "crash":
                error, where = message[2]
                outcome: Outcome = WorkerCrashedError(error, where, self.pid)
            else:
                outcome = message[2]  # the report, or the OSError itself, pickled
            if future.done():
                # The lead stopped waiting for it (its grace period ran out first): the
                # cycle happened all the same, and counts.
                self._on_late(agent, outcome)
            elif isinstance(outcome, CycleReport):
                future.set_result(outcome)
            else:
                future.set_exception(outcome)

    def _lost(self, why: str, *, tell: bool = True) -> None:
        if not self.alive:
            return
        self.alive = False
        self._closed_unasked = not self._stop_sent
        if self._loop is not None:
            self._loop.remove_reader(self._conn.fileno())
        error = WorkerLostError(f"the worker process of {', '.join(self.agents)} ended: {why}")
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(error)
        for _, future in self._waiting.values():
            if not future.done():
                future.set_exception(error)
        self._waiting.clear()
        if tell:
            self._on_lost(self)

    # -- stopping --------------------------------------------------------------
    def stop(self, grace: float) -> None:
        """Ask it to stop: the cycles it has in flight may go on for `grace` seconds,
        then the rest is cut (as the lead cuts its own), and it exits."""
        if not self._stop_sent:
            self._stop_sent = True
            if self.alive:
                self._send(("stop", max(0.0, grace)))

    def hurry(self) -> None:
        """Ask it to cut its cycles in flight at once (a second Ctrl-C), and exit."""
        if not self._hurried:
            self._hurried = self._stop_sent = True
            if self.alive:
                self._send(("stop", 0.0))

    def kill(self, failure: str | None = None) -> None:
        """Kill it; `failure` says what went wrong with it, where that is not the lead's
        stop (which had waited long enough for it)."""
        if self.process.is_alive():
            self.killed = True
            self._killed_for = failure
            self.process.kill()

    async def exited(self) -> None:
        """Return once the process has exited (and is reaped)."""
        # Polled: each look also reaps it (waitpid), which its sentinel alone would not.
        while self.process.is_alive():  # noqa: ASYNC110
            await asyncio.sleep(EXIT_POLL)

    async def ended(self) -> None:
        """Once its pipe has closed: return when the process has exited, killing it if it
        is still there LINGER seconds on (its agents are about to run elsewhere)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.exited(), LINGER)
        # Its pipe closed unasked: still there, it has failed (stuck in its teardown, say).
        # Asked to stop, it had closed its pipe as its last act: nothing of it is lost.
        self.kill(f"it closed its pipe but was still there {LINGER:g} s on: killed"
                  if self._closed_unasked else None)
        await self.exited()

    def failure(self) -> str | None:
        """How the process ended if that was not the lead's doing (None while it runs,
        after it exited as asked, or once the lead killed it on a stop)."""
        code = self.process.exitcode
        if code is not None and self._killed_for is not None:
            return self._killed_for
        if code is None or self.killed or (code == 0 and self._stop_sent):
            return None
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def status(self) -> WorkerStatus:
        """What status.json says of it."""
        running = self.process.exitcode is None and self.pid is not None
        return WorkerStatus(pid=self.pid, agents=list(self.agents), running=running,
                            ended=None if running else self.failure())

    def close(self) -> None:
        """Once the process has exited: take what it left in the pipe, then close it."""
        with contextlib.suppress(EOFError, OSError):
            while self.alive and self._conn.poll():
                self._handle(self._conn.recv())
        # One that died meanwhile, its end not read yet, is told as one that died before.
        self._lost("it was stopped", tell=self.process.exitcode not in (0, None))
        # Nobody waits for it now: a ready future that failed must not be reported unseen.
        if self._ready is not None and self._ready.done() and not self._ready.cancelled():
            self._ready.exception()
        self._conn.close()


async def stop_all(links: list[WorkerLink], grace: float, hurry: asyncio.Event) -> None:
    """Stop the workers as the lead stops: their cycles in flight have `grace` seconds
    more (what is left of the lead's grace period), `hurry` (Ctrl-C again) cuts them at
    once, and a worker still there STOP_MARGIN seconds past either is killed. The last
    messages of each (reports of cycles that ended late) are taken before its pipe
    closes."""
    if not links:
        return
    loop = asyncio.get_running_loop()
    for link in links:
        link.stop(grace)
    exits = asyncio.ensure_future(_all_exited(links))
    hurried = asyncio.ensure_future(hurry.wait())
    limit, shortened = loop.time() + max(0.0, grace) + STOP_MARGIN, False
    try:
        while not exits.done():
            if hurry.is_set() and not shortened:
                shortened = True
                for link in links:
                    link.hurry()
                limit = min(limit, loop.time() + STOP_MARGIN)
            if (left := limit - loop.time()) <= 0:
                break
            waiting: set[asyncio.Future[Any]] = {exits} if shortened else {exits, hurried}
            await asyncio.wait(waiting, timeout=left, return_when=asyncio.FIRST_COMPLETED)
    finally:
        hurried.cancel()
        exits.cancel()
    for link in links:
        if link.process.is_alive():
            logger.warning(
                "worker process %s (agents %s) did not stop in time: killed; the cycles it "
                "had in flight are marked interrupted at the next start",
                link.pid, ", ".join(link.agents),
            )
            link.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(_all_exited(links), STOP_MARGIN)
    for link in links:
        link.close()


async def _all_exited(links: list[WorkerLink]) -> None:
    for link in links:
        await link.exited()
