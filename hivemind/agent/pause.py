"""Budgets at a cycle's start: a spent day pauses the agent, a spent task fails.

A person is told once of each (a `budget` record says so, so a restart the same day
does not tell them again); a paused agent gives back the tasks others may do.
"""

from __future__ import annotations

import logging

from hivemind.agent.audit import AuditLog
from hivemind.agent.budget import BudgetTracker
from hivemind.agent.perceive import Perception
from hivemind.agent.record import BudgetNotice
from hivemind.agent.report import CycleReport
from hivemind.agent.services import HiveServices
from hivemind.errors import UserError
from hivemind.hive.layout import HUMAN
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig

logger = logging.getLogger(__name__)

DAY_SPENT = "daily budget spent"  # why a cycle did not run: the agent is paused
TASKS_SPENT = "task budgets spent"  # ...: every task it had was stopped by its budget


class BudgetPause:
    """What one agent's budgets stop before a cycle runs."""

    def __init__(self, name: str, services: HiveServices, working: WorkingMemoryManager,
                 audit: AuditLog) -> None:
        self.name = name
        self.s = services  # task_changed is set once the daemon runs
        self.working = working
        self.audit = audit

    def check(self, budget: BudgetTracker, cfg: AgentConfig, p: Perception,
              report: CycleReport, cycle: int, seen: set[str]) -> str | None:
        """A spent day pauses the agent; a spent task fails that task. Why no cycle runs
        (`DAY_SPENT`, `TASKS_SPENT`), or None. `seen`: the input keys seen before."""
        # A task retried since (`hivemind task retry`) counts its tokens from zero again.
        budget.restart_retried({t: r.task.retried_at for t, r in p.active.items()})
        if budget.day_exhausted(cfg.budget):
            released = self._release_unassigned(p)
            if budget.first_warning(key := f"day:{budget.day}"):
                self.s.post.send(
                    self.name, HUMAN, f"[budget] {self.name} paused",
                    f"{self.name} spent its daily budget of {cfg.budget.per_day} tokens "
                    f"({budget.spent_today} used); it resumes tomorrow (UTC) or when "
                    "you raise `budget.per_day` in its ROM."
                    + (f" Back in tasks/ for other agents: {', '.join(released)}."
                       if released else ""),
                )
                self._told(key, cycle)
            return DAY_SPENT
        for tid in budget.tasks_exhausted(cfg.budget, list(p.active)):
            ref = p.active.pop(tid)
            self.working.remove(f"task:{tid}")  # not shown to the model as active any more
            try:
                self.s.board.fail(
                    ref, f"token budget per task spent ({budget.per_task[tid]} tokens)",
                    self.name, final=True,
                )
            except UserError:  # taken from it meanwhile (`hivemind task cancel`)
                continue
            report.tasks_failed += 1  # in the run's figures, whether a cycle runs or not
            if budget.first_warning(key := f"task:{tid}"):
                self.s.post.send(
                    self.name, HUMAN, f"[budget] task {tid} stopped",
                    f"Task {tid} used {budget.per_task[tid]} tokens, over the per-task "
                    f"budget of {cfg.budget.per_task}; it was moved to tasks/failed/.",
                )
                self._told(key, cycle)
            self.s.task_changed()
        # Nothing to do if the budget failed every task and nothing else is new (a
        # watched file that changed is input on its own).
        return None if p.has_work or (p.watch_keys - seen) else TASKS_SPENT

    def _release_unassigned(self, p: Perception) -> list[str]:
        """A paused agent gives back the tasks it holds that were not assigned to it, so
        other agents can do them today; its ids. Tasks assigned to it wait for it."""
        released = []
        for tid, ref in list(p.active.items()):
            if ref.task.assignee == self.name:
                continue
            try:
                self.s.board.release(ref, self.name)
            except (UserError, OSError) as exc:  # moved meanwhile: nothing to give back
                logger.warning("%s: task %s not given back: %s", self.name, tid, exc)
                continue
            del p.active[tid]
            self.working.remove(f"task:{tid}")
            released.append(tid)
        if released:
            self.s.task_changed()
        return released

    def _told(self, key: str, cycle: int) -> None:
        """Note in the audit log that a person was told `key` (a budget notice), so a
        restart the same day does not tell them again (see `Agent.recover`)."""
        self.audit.append(BudgetNotice(cycle=cycle, warned=key))
