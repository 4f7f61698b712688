"""Token budgets per agent per day and per task (ROM `budget`, hive.toml defaults)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from hivemind.clock import utcnow
from hivemind.settings import TokenBudget


def _utc(now: datetime | None) -> datetime:
    """`now` (default: the current time) in UTC; a naive datetime is taken as UTC."""
    n = now or utcnow()
    return n.replace(tzinfo=UTC) if n.tzinfo is None else n.astimezone(UTC)


def start_of_day(now: datetime | None = None) -> datetime:
    """Midnight UTC of the budget day `now` falls in (budget days are UTC days)."""
    n = _utc(now)
    return datetime(n.year, n.month, n.day, tzinfo=UTC)


@dataclass
class BudgetTracker:
    """Counts tokens spent; says what is exhausted. Restored from the audit log."""

    spent_today: int = 0
    per_task: dict[str, int] = field(default_factory=dict)
    day: date = field(default_factory=lambda: utcnow().date())
    warned: set[str] = field(default_factory=set)
    retried: dict[str, datetime] = field(default_factory=dict)  # each task's `retried_at` seen

    def restart_retried(self, held: Mapping[str, datetime | None]) -> list[str]:
        """Held tasks retried (`hivemind task retry`) since this tracker last saw them
        count their tokens from zero again; their ids. (After a restart, `recover`
        restores each one's count since its retry and notes its time here.)"""
        restarted = []
        for tid, at in held.items():
            if at is not None and self.retried.get(tid) != at:
                self.retried[tid] = at
                if self.per_task.pop(tid, None) is not None:
                    restarted.append(tid)
        return restarted

    def record(self, tokens: int, task_ids: list[str], now: datetime | None = None) -> None:
        self._roll(now)
        self.spent_today += tokens
        for tid in task_ids:
            self.per_task[tid] = self.per_task.get(tid, 0) + tokens

    def day_exhausted(self, budget: TokenBudget, now: datetime | None = None) -> bool:
        self._roll(now)
        return budget.per_day is not None and self.spent_today >= budget.per_day

    def tasks_exhausted(self, budget: TokenBudget, task_ids: list[str]) -> list[str]:
        if budget.per_task is None:
            return []
        return [t for t in task_ids if self.per_task.get(t, 0) >= budget.per_task]

    def paused_today(self) -> bool:
        """True once a person was told today that the day's budget is spent."""
        self._roll(None)
        return f"day:{self.day}" in self.warned

    def first_warning(self, key: str) -> bool:
        """True the first time `key` is seen (so a person is told once)."""
        if key in self.warned:
            return False
        self.warned.add(key)
        return True

    def _roll(self, now: datetime | None) -> None:
        today = _utc(now).date()
        if today != self.day:
            self.day = today
            self.spent_today = 0
            self.warned = {w for w in self.warned if not w.startswith("day:")}
