"""Pauses people make, as the running daemon follows them (a part of `Daemon`).

`hivemind pause AGENT` (a file in `.hivemind/pauses/`, see `hive.steering`) and a
ROM's `enabled: false` pause an agent: it runs no cycle (so it takes no mail), new
work goes to the others, and the tasks it holds go back to tasks/ once its cycle in
flight ends (those assigned to it wait for it, as for any paused agent). `hivemind
resume AGENT` lifts the pause, and one the daemon made after the model API refused
the agent. The pauses folder is looked at every `POLL` seconds: one stat while
nothing changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from hivemind.daemon.runner import AgentRunner
from hivemind.hive.layout import Hive
from hivemind.hive.steering import PauseRecord, pause_records, pauses_version

logger = logging.getLogger(__name__)

POLL = 0.5
DISABLED = "enabled: false in its ROM"


def by_person(record: PauseRecord) -> str:
    return f"by {record.by}; `hivemind resume {record.agent}` resumes it"


class PauseWatch:
    """What people paused, read again when `.hivemind/pauses/` changes."""

    def __init__(
        self,
        hive: Hive,
        runners: Mapping[str, AgentRunner],
        *,
        routing_changed: Callable[[], None],
        give_back: Callable[[str], list[str]],
    ) -> None:
        """`routing_changed`: who takes work changed (configs read again, a dispatch);
        `give_back`: an agent's tasks back to tasks/, their ids."""
        self.hive = hive
        self.runners = runners
        self._routing_changed = routing_changed
        self._give_back = give_back
        self._version: tuple[int, int] | None = None
        self._paused: dict[str, PauseRecord] = {}
        # The newest resume seen per agent: a newer one lifts the daemon's own pause.
        self._resumed: dict[str, datetime] = {}
        self.check(starting=True)

    def check(self, *, starting: bool = False) -> None:
        """Bring each runner's pause up to date with the files and its ROM."""
        self.check_files(starting=starting)
        for runner in list(self.runners.values()):
            self.follow(runner)

    def check_files(self, *, starting: bool = False) -> None:
        """Read the pauses again if their folder changed (one stat otherwise): before
        each dispatch, so a task dropped just after a pause is not given out."""
        version = pauses_version(self.hive)
        if version == self._version:
            return
        self._version = version
        records = pause_records(self.hive)
        self._paused = {name: r for name, r in records.items() if r.paused}
        self._resumes(records, starting)
        for runner in list(self.runners.values()):
            self.follow(runner)

    def _resumes(self, records: dict[str, PauseRecord], starting: bool) -> None:
        """Lift the model-refused pause of each agent resumed since the last look (a
        resume older than the daemon is none: a start lifts those pauses anyway)."""
        for name, record in records.items():
            if record.paused:
                continue
            seen = self._resumed.get(name)
            self._resumed[name] = record.at
            if starting or (seen is not None and record.at <= seen):
                continue
            runner = self.runners.get(name)
            if runner is not None and runner.model_pause is not None:
                logger.warning("%s resumes: `hivemind resume` (it was paused: %s)", name,
                               runner.model_pause)
                runner.model_pause = None
                runner.failures = 0
                # What it saw when refused is the same on disk now: it looks again.
                if runner.worker is not None:
                    runner.worker.look_again(name)
                runner.agent.seen.clear()
                runner.wake.set()
                self._routing_changed()

    def reason(self, runner: AgentRunner) -> str | None:
        """Why a person has the agent paused now, or None."""
        record = self._paused.get(runner.agent.name)
        if record is not None:
            return by_person(record)
        cfg = runner.agent.config()
        return DISABLED if cfg is not None and not cfg.enabled else None

    def follow(self, runner: AgentRunner) -> None:
        """Pause or resume the runner as the files and its ROM say (a new one too)."""
        why = self.reason(runner)
        if why == runner.steer_pause:
            return
        name = runner.agent.name
        runner.steer_pause = why
        self._routing_changed()
        if why is None:
            logger.warning("%s resumes", name)
            runner.wake.set()
            return
        logger.warning("%s is paused (%s)%s", name, why,
                       ": its tasks go back to tasks/ after its cycle in flight"
                       if runner.busy else "")
        if not runner.busy:
            self.give_back(runner)

    def give_back(self, runner: AgentRunner) -> None:
        """The tasks of a paused agent back to tasks/ (those assigned to it wait)."""
        if runner.steer_pause is None:
            return
        released = self._give_back(runner.agent.name)
        if released:
            logger.warning("%s is paused: its tasks are back in tasks/: %s",
                           runner.agent.name, ", ".join(released))
            self._routing_changed()

    async def loop(self) -> None:
        while True:
            await asyncio.sleep(POLL)
            self.check()
