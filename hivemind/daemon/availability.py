"""Which running agents take work now (their configs, for routing), and why the others
do not: a daily budget spent, a key the model API refused, a person's pause, tools that
cannot end a task.
"""

from __future__ import annotations

import time

from hivemind.clock import utcnow
from hivemind.daemon.runner import AgentRunner
from hivemind.settings import AgentConfig

CONFIGS_TTL = 1.0  # routing re-reads the ROMs at least this often

UNFINISHING = "cannot finish a task: its ROM's tools: allow neither complete_task nor fail_task"


class Availability:
    """The running agents' configs for dispatch, read again when told (`forget`) or
    after CONFIGS_TTL (edits the watcher missed)."""

    def __init__(self, runners: dict[str, AgentRunner]) -> None:
        self.runners = runners
        self._configs: dict[str, AgentConfig] | None = None
        self._configs_at = 0.0
        self._unfinishing: set[str] = set()  # agents whose tools cannot end a task

    def forget(self) -> None:
        """A ROM changed, an agent came, left, paused or resumed: read them again."""
        self._configs = None

    def configs(self) -> dict[str, AgentConfig]:
        """Each agent that takes work now, and its config."""
        now = time.monotonic()
        if self._configs is None or now >= self._configs_at + CONFIGS_TTL:
            out = {}
            paused = self.paused()
            self._unfinishing = set()
            for name, runner in self.runners.items():
                if name in paused:
                    continue  # its daily budget is spent: tasks for it wait, others go on
                cfg = runner.agent.config()
                if cfg is not None and not cfg.finishes_tasks:
                    self._unfinishing.add(name)  # a task it took would never end
                elif cfg is not None:
                    out[name] = cfg
            self._configs, self._configs_at = out, now
        return self._configs

    def away(self) -> dict[str, str]:
        """Why agents that run take no work now, for the waiting list (after `configs`)."""
        away = {n: "is paused: " + (self.runners[n].model_pause or self.runners[n].steer_pause
                                   or "its daily token budget is spent") for n in self.paused()}
        away.update(dict.fromkeys(self._unfinishing, UNFINISHING))
        return away

    def paused(self) -> set[str]:
        """The agents paused: their daily budget is spent today, the model API refused
        their key or model (see `outage.pause_if_refused`), or a person paused them
        (see `pausing`)."""
        today = utcnow().date()
        return {n for n, r in self.runners.items()
                if r.paused_on == today or r.model_pause or r.steer_pause}
