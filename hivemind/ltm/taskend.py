"""What a task's end does to long-term memory: consolidate its history, learn from its
outcome (TD(λ)), promote its task memories that matter, clear the rest, prune.

Where it all goes: the task's project; a task of no project has none, so what it
leaves is proposed to the global tier and waits for a person (see `approval`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from hivemind.errors import MemoryFullError
from hivemind.hive.layout import HUMAN, Hive
from hivemind.ltm import retention
from hivemind.ltm.approval import tell_person
from hivemind.ltm.backend import MemoryBackend, counting
from hivemind.ltm.consolidation import Memorable, memorable, promote
from hivemind.ltm.learning import ValueLearner, trace_key
from hivemind.ltm.records import MemoryRecord, MemoryStatus, TaskEndReport, Tier, utcnow
from hivemind.ltm.scopes import scope_key
from hivemind.memory.blocks import HistoryBlock
from hivemind.settings import MemorySettings


class TaskEnd:
    """Ends tasks for one store; `remember` is the store's own (capacity, dedupe)."""

    def __init__(
        self,
        backend: MemoryBackend,
        settings: MemorySettings,
        learner: ValueLearner,
        policy: retention.RetentionPolicy,
        remember: Callable[..., MemoryRecord],
        hive: Hive | None,
    ) -> None:
        self.backend, self.settings, self.learner = backend, settings, learner
        self.policy, self.remember, self.hive = policy, remember, hive

    def end_task(
        self,
        task_id: str,
        *,
        success: bool,
        goal: str | None,
        history: Sequence[HistoryBlock] = (),
        project: str | None = None,
        agent: str | None = None,
        at: datetime | None = None,
    ) -> TaskEndReport:
        """Consolidate, learn, promote, clear (one transaction where the backend has them:
        all of it, or after a crash none).

        Most tasks leave nothing to do: no history worth keeping, no traces, no task
        memories, the agent under its cap. When the backend's counts show that, the
        (empty) report comes back without a transaction.
        """
        worth_keeping = memorable(history, self.settings.consolidate_importance)
        if not worth_keeping and self._nothing_to_write(task_id, project, agent):
            return TaskEndReport(task_id=task_id, success=success, goal=goal)
        proposed: list[MemoryRecord] = []
        with self.backend.transaction():
            report = self._end(task_id, success, goal, worth_keeping, project, agent, at,
                               proposed)
        tell_person(self.hive, proposed, task_id)  # once it is all stored
        return report

    def _nothing_to_write(self, task_id: str, project: str | None, agent: str | None) -> bool:
        """True if ending the task would write nothing (history aside): no TD traces to
        learn from or forget, no task memory to promote or clear, nothing to prune.
        False when the backend keeps no counts, or cannot tell right now."""
        counts = counting(self.backend)
        if counts is None:
            return False
        cap = self.policy.max_per_agent
        pruned = agent if agent and cap is not None else None  # whose count matters
        facts = counts.task_end_facts(
            scope_key(Tier.TASK, project, task_id), trace_key(task_id), pruned,
            scope_key(Tier.PROJECT if project else Tier.GLOBAL, project, None),
        )  # fmt: skip
        if facts is None:
            return False
        mine = facts.agent_memories
        over = mine is not None and cap is not None and mine > cap
        return not facts.has_meta and not facts.task_memories and not over

    def _end(
        self,
        task_id: str,
        success: bool,
        goal: str | None,
        worth_keeping: Sequence[Memorable],
        project: str | None,
        agent: str | None,
        at: datetime | None,
        proposed: list[MemoryRecord],
    ) -> TaskEndReport:
        now = at or utcnow()
        report = TaskEndReport(task_id=task_id, success=success, goal=goal)
        domain, _, task_type = (goal or "").partition("/")
        for item in worth_keeping:
            try:
                record = self.remember(
                    item.content, agent=agent or HUMAN, scope="project" if project else "global",
                    project=project, task_id=task_id, importance=item.importance,
                    domain=domain or None, task_type=task_type or None, tags=["history"],
                    at=item.happened_at, needs_approval=project is None, tell=False,
                )  # fmt: skip
            except MemoryFullError as exc:  # the task still ends; the audit log says why
                report.refused.append(str(exc))
                break
            report.consolidated.append(record.id)
            proposed.append(record)
        if goal:
            report.value_updates = self.learner.end_task(task_id, goal, 1.0 if success else 0.0)
        else:
            self.learner.forget(task_id)
        target = scope_key(Tier.PROJECT if project else Tier.GLOBAL, project, None)
        task_scope = scope_key(Tier.TASK, project, task_id)
        task_memories = self._task_memories(task_scope)
        moved = promote(self.backend, task_memories, self.settings, target)
        if project is None:  # no project: the global tier only with a person's OK
            for record in moved.kept:
                record.status = MemoryStatus.PROPOSED
            proposed.extend(moved.kept)
        self.backend.add_many(moved.kept)
        report.promoted, report.cleared = [r.id for r in moved.kept], moved.cleared
        report.refused.extend(moved.refused)
        self.backend.delete_many([r.id for r in task_memories], scope=task_scope)
        retention.evict_over_capacity(self.backend, self.settings.max_items, target)
        if agent:
            report.pruned = retention.prune_agent(self.backend, agent, self.policy, now, target)
        return report

    def _task_memories(self, task_scope: str) -> list[MemoryRecord]:
        """The memories of a task scope (no query when the backend counts none)."""
        counts = counting(self.backend)
        if counts is not None and counts.task_memory_count(task_scope) == 0:
            return []
        return self.backend.query({"scope": task_scope})
