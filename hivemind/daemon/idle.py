"""`--until-idle`: when the daemon stops because nothing is left to do, or nothing can
move any more (a part of `Daemon`).

It waits for what may still come by itself: a cycle in flight, a retry, the model
service and the disk's space up to `[daemon] give_up_after`; then it stops.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hivemind.daemon import outage
from hivemind.daemon.diskfull import DiskGuard
from hivemind.daemon.dispatch_loop import DispatchLoop
from hivemind.daemon.outcome import DISK_FULL
from hivemind.daemon.runner import AgentRunner, RunOptions
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.settings import HiveConfig


@dataclass
class IdleState:
    """What is still on the board for the running agents."""

    pending: int = 0
    active: int = 0
    unread: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.pending == 0 and self.active == 0 and not any(self.unread.values())


def hive_idle_state(hive: Hive, agents: list[str]) -> IdleState:
    """Count pending tasks, active tasks of `agents` and their unread mail (disk only)."""
    state = IdleState()
    if hive.tasks_dir.is_dir():
        state.pending = sum(
            1 for p in hive.tasks_dir.glob("*.md") if p.is_file() and not p.name.startswith(".")
        )
    for name in agents:
        adir = hive.active_dir_for(name)
        if adir.is_dir():
            state.active += sum(1 for p in adir.glob("*.md") if not p.name.startswith("."))
        n = len(Mailbox(hive, name).unread())
        if n:
            state.unread[name] = n
    return state


class IdleWatch:
    """The daemon's `--until-idle` watch (`Daemon` inherits it)."""

    hive: Hive
    config: HiveConfig
    options: RunOptions
    runners: dict[str, AgentRunner]
    disk: DiskGuard
    stopping: asyncio.Event
    stalled: IdleState | None
    dispatching: DispatchLoop
    _retiring: dict[str, asyncio.Task[None]]
    _last_activity: float

    if TYPE_CHECKING:  # the daemon's own, used here
        def stop(self, reason: str) -> None: ...

    async def _idle_loop(self) -> None:
        """With --until-idle: stop when no work is left, or nothing can move any more."""
        settle, give_up_after = self.options.idle_settle, self.config.daemon.give_up_after
        while not self.stopping.is_set():
            await asyncio.sleep(settle / 3)
            if self.disk.full:  # as for the model service: wait for space, then give up
                if self.disk.full_for() >= give_up_after:
                    self.stalled = hive_idle_state(self.hive, list(self.runners))
                    self.stop(DISK_FULL)
                continue
            if self.dispatching.wanted.is_set() or self._retiring or any(
                r.busy or r.wake.is_set() or outage.still_trying(r, give_up_after)
                for r in self.runners.values()
            ):
                continue
            if time.monotonic() - self._last_activity < settle:
                continue
            state = hive_idle_state(self.hive, list(self.runners))
            if state.empty:
                self.stop("idle")
            elif time.monotonic() - self._last_activity > max(2.0, 4 * settle):
                self.stalled = state
                self.stop(outage.stall_reason(self.runners.values()))
