"""A full disk under the hive: the daemon's writers wait, and resume by themselves.

With no space left, a cycle would pay a model call whose outcome it cannot write. So
the first write that finds the disk full (a tool's, the audit log's, a start-up's)
pauses the hive: no cycle starts, one line says why (the console, status.json, the
waiting list), and a probe writes a small file with back-off until one fits. Then
every agent resumes at once, and an agent whose start-up could not write recovers
first (its interrupted cycles marked, its counters read back).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hivemind.errors import StoreError
from hivemind.fs.diskspace import has_space, is_full
from hivemind.fs.sayonce import warn_once
from hivemind.hive.layout import Hive
from hivemind.ltm.embeddings import configured_embedder
from hivemind.ltm.store import LongTermMemory
from hivemind.settings import HiveConfig

if TYPE_CHECKING:
    from hivemind.agent.cycle import Agent
    from hivemind.agent.services import HiveServices
    from hivemind.daemon.runner import AgentRunner

logger = logging.getLogger(__name__)

PROBE_MAX = 10.0
"""Seconds between two looks for space, at most (the back-off doubles up to it)."""
FULL = "(disk full)"
"""The waiting list's name for the pause: no task waits on its own, the hive does."""


class DiskGuard:
    """Pauses the daemon's cycles while the hive's disk is full; see the module."""

    def __init__(
        self, hive: Hive, runners: dict[str, AgentRunner], backoff: float,
        on_resume: Callable[[], None],
    ) -> None:
        self.hive = hive
        self.runners = runners
        self.backoff = backoff
        self.on_resume = on_resume
        self.problem: str | None = None  # the line that says why the hive waits
        self._full_at = 0.0  # (monotonic) when the disk was last found full
        self._space = asyncio.Event()
        self._space.set()
        self._filled = asyncio.Event()  # wakes the probe
        self._unrecovered: set[str] = set()
        self._later: list[Callable[[], None]] = []  # what a full disk put off

    @property
    def full(self) -> bool:
        return not self._space.is_set()

    def full_for(self) -> float:
        """Seconds the disk has been full (0 while it has space)."""
        return time.monotonic() - self._full_at if self.full else 0.0

    def saw(self, exc: BaseException) -> bool:
        """True if `exc` says the disk is full; the hive then pauses (said once)."""
        if not is_full(exc):
            return False
        if not self.full:
            # The file is often a temp name: its folder says more.
            named = exc.filename if isinstance(exc, OSError) else None
            where = (f"writing in {self.hive.relative(Path(os.fsdecode(named)).parent)}/: "
                     if named else "")
            said = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            self.problem = (f"the disk is full ({where}{said}): the agents wait, and go on "
                            "by themselves once space is freed")
            logger.warning("%s", self.problem)
            self._full_at = time.monotonic()
            self._space.clear()
            self._filled.set()
        return True

    def open_store(self, services: HiveServices, config: HiveConfig) -> None:
        """Open the long-term memory store into `services`; on a disk too full to open
        it, the agents start without it (said), and it opens once space is back."""
        try:
            services.ltm = LongTermMemory(self.hive, config.memory, config.agents.retrieval,
                                          configured_embedder(config.memory.embeddings))
        except StoreError:
            try:
                space = has_space(self.hive.state_dir)
            except OSError:
                space = True  # .hivemind/ itself is the trouble, not the disk
            if space:
                raise  # not the disk: the one line that says what is wrong, as ever
            path = self.hive.memory_db
            self.saw(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path)))
            self._later.append(lambda: self.open_store(services, config))

    def recover(self, agent: Agent) -> None:
        """`agent.recover()`; on a full disk the daemon starts all the same, says why it
        cannot write, and recovers the agent once space is back."""
        try:
            agent.recover()
        except OSError as exc:
            if not self.saw(exc):
                raise
            self._unrecovered.add(agent.name)

    async def room(self, stopping: asyncio.Event) -> bool:
        """Wait while the disk is full; False if the daemon stops meanwhile."""
        if not self.full:
            return True
        waits = [asyncio.ensure_future(self._space.wait()),
                 asyncio.ensure_future(stopping.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        return not stopping.is_set()

    def waiting(self, waiting: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The waiting list, with the pause first while there is one."""
        return [(FULL, self.problem), *waiting] if self.problem else waiting

    async def loop(self) -> None:
        """The probe: while the disk is full, look for space with back-off."""
        while True:
            await self._filled.wait()
            delay = self.backoff
            while True:
                await asyncio.sleep(delay)
                try:
                    if await asyncio.to_thread(has_space, self.hive.state_dir):
                        break
                except OSError as exc:  # not a full disk: said once, and looked at again
                    warn_once(logger, (self.hive.state_dir, exc.errno),
                              "%s: cannot be written: %s", self.hive.state_dir, exc)
                delay = min(PROBE_MAX, delay * 2)
            self._filled.clear()
            self._resume()

    def _resume(self) -> None:
        logger.warning("the disk has space again: the agents go on")
        self.problem = None
        self._space.set()
        later, self._later = self._later, []
        for step in later:
            step()  # full again: paused again, tried later
        for name in sorted(self._unrecovered):
            self._unrecovered.discard(name)
            runner = self.runners.get(name)
            if runner is not None and runner.worker is None:
                self.recover(runner.agent)  # full again: paused again, tried later
        for runner in self.runners.values():
            runner.retry_at, runner.failures = 0.0, 0
            runner.wake.set()
        self.on_resume()
