"""When the daemon dispatches: whenever asked (a task dropped, a cycle's end, a routing
change), with the task files the watcher named since, and tasks/ listed whole now and
then; what it leaves is the waiting list status.json shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from hivemind.daemon.availability import Availability
from hivemind.daemon.diskfull import DiskGuard
from hivemind.daemon.dispatch import Dispatcher
from hivemind.daemon.runner import AgentRunner, RunOptions
from hivemind.settings import DaemonSettings

FULL_DISPATCH_EVERY = 12  # rescan intervals between full listings of tasks/ by dispatch
DISPATCH_COALESCE = 0.005  # s a dispatch waits, cycles in flight, to take their ends together


class DispatchLoop:
    """Runs `Dispatcher.dispatch` each time `wanted` is set, and wakes the agents it
    claimed tasks for."""

    def __init__(
        self, dispatcher: Dispatcher, availability: Availability, disk: DiskGuard,
        runners: dict[str, AgentRunner], settings: DaemonSettings, options: RunOptions,
        request: Callable[[], None],
    ) -> None:
        self.dispatcher = dispatcher
        self.availability = availability
        self.disk = disk
        self.runners = runners
        self.settings = settings  # (its rescan interval)
        self.options = options  # (its back-off)
        self.request = request  # the daemon's: a dispatch, and a sign of activity
        self.wanted = asyncio.Event()
        self.dispatched = asyncio.Event()  # start-up's first dispatch is done (or a stop)
        self.changed_tasks: set[Path] = set()  # task files named by the watcher
        self.waiting: list[tuple[str, str]] = []  # (task id, why) for status.json
        self._full_dispatch_at = 0.0  # when tasks/ is next listed whole

    async def run(self, stopping: asyncio.Event, quiet: asyncio.Event) -> None:
        """Until `stopping`; `quiet` is set while no cycle is in flight."""
        board = self.dispatcher.board
        settle_again: asyncio.TimerHandle | None = None
        while not stopping.is_set():
            await self.wanted.wait()
            self.wanted.clear()
            now = time.monotonic()
            changed: set[Path] | None = self.changed_tasks
            self.changed_tasks = set()
            if now >= self._full_dispatch_at:
                # Now and then, list tasks/ whole. The watcher's own rescan already turns
                # whatever the OS did not report into events; this is the last resort.
                changed = None
                self._full_dispatch_at = now + self.settings.rescan_interval * FULL_DISPATCH_EVERY
            try:
                configs = self.availability.configs()
                result = self.dispatcher.dispatch(configs, changed, self.availability.away())
            except OSError as exc:
                self.dispatched.set()
                self.disk.saw(exc)  # (a .reason file that does not fit): the hive waits
                self._full_dispatch_at = 0.0
                # The board itself is broken (e.g. tasks/active/<agent> is a file): say so
                # in status.json and look again later, without counting as activity.
                self.waiting = [("(board)", f"tasks cannot be moved: {exc}")]
                asyncio.get_running_loop().call_later(self.options.backoff, self.wanted.set)
                continue
            self.dispatched.set()
            for name in result.claimed:
                self.runners[name].wake.set()
            self.waiting = self.disk.waiting(result.waiting)
            if settle_again is not None:
                settle_again.cancel()
                settle_again = None
            if board.unsettled:
                # Files still being written: no event will come for them if they were
                # already there at start-up, so look again once they can have settled.
                settle_again = asyncio.get_running_loop().call_later(
                    board.settle_wait, self.request
                )
            if not quiet.is_set():
                # Cycles in flight: their ends come in bursts; take them in one scan. Once
                # none is left, nothing more is coming: the next request is served at once.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(quiet.wait(), DISPATCH_COALESCE)
