"""The SQLite backend's in-process counts: what a task end and retention ask at every write.

A `Ledger` knows a few counts (rows in all, an agent's evictable rows per scope, the
rows of each task scope) and the small `meta` table without asking SQLite. It is
exact for the data as its connection sees it: every write of ours reports the rows it
adds and removes (as `FACT_COLUMNS`); the backend replaces it with an empty one when
another connection commits, and when a write of ours fails.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hivemind.ltm.backend import TaskEndFacts, plain
from hivemind.ltm.records import Tier
from hivemind.ltm.retention import EVICTABLE

# What the ledger needs to know of a row: its tier, scope, agent, and the columns of
# `retention.EVICTABLE` (in that filter's order), compared with the filter's values.
FACT_COLUMNS = ("tier", "scope", "agent", *EVICTABLE)
_EVICTABLE_FACTS = tuple(plain(v) for v in EVICTABLE.values())
_TASK_TIER = Tier.TASK.value


class Ledger:
    """Counts and meta values known without asking SQLite (None or a missing key = not
    known)."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.agents: dict[tuple[str, str], int] = {}
        """Rows `retention.EVICTABLE` matches, per (scope, agent) asked about."""
        self.tasks: dict[str, int] | None = None
        """Task-tier rows per task scope (a task scope without any is missing)."""
        self.meta: dict[str, str] | None = None
        self.meta_asked = False
        """A meta key was read by itself: the next question reads the whole table."""

    def task_end_facts(
        self, task_scope: str, meta_key: str, agent: str | None, scope: str
    ) -> TaskEndFacts | None:
        """`SQLiteBackend.task_end_facts` if every answer is known here, else None."""
        mine = None if agent is None else self.agents.get((scope, agent))
        if self.meta is None or self.tasks is None or (agent is not None and mine is None):
            return None
        return TaskEndFacts(meta_key in self.meta, self.tasks.get(task_scope, 0), mine)

    def counting(self) -> bool:
        """True if some row count is kept: writes must then say which rows they touch."""
        return self.total is not None or bool(self.agents) or self.tasks is not None

    def count(self, facts: Iterable[Sequence[Any]], sign: int) -> None:
        """Rows (as `FACT_COLUMNS`) added (`sign` +1) or removed (-1)."""
        for row in facts:
            if self.total is not None:
                self.total += sign
            mine = (row[1], row[2])
            if mine in self.agents and tuple(row[3:]) == _EVICTABLE_FACTS:
                self.agents[mine] += sign
            if row[0] == _TASK_TIER and self.tasks is not None:
                left = self.tasks.get(row[1], 0) + sign
                if left > 0:
                    self.tasks[row[1]] = left
                else:
                    self.tasks.pop(row[1], None)
