"""Keeping the store bounded, scope by scope: eviction over `max_items`, per-agent
importance-weighted pruning.

Capacity is per scope (a task, a project, the global tier): a write evicts only from
its own scope, so one project's writes never evict another's memories; a write to a
full scope with nothing it may evict is refused (`MemoryFullError`). Approved global
preferences and proposals waiting for a person are never removed: a person decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hivemind.errors import MemoryFullError
from hivemind.ltm.backend import Filters, MemoryBackend, PruneCandidate, counting, ranking
from hivemind.ltm.records import MemoryStatus
from hivemind.ltm.retrieval import recency_of
from hivemind.ltm.scopes import describe_scope

EVICT_SHARE = 0.10

# Everything a person did not decide about.
EVICTABLE: Filters = {"preference": False, "status": MemoryStatus.ACTIVE}


@dataclass(frozen=True)
class RetentionPolicy:
    """Per-agent cap within a scope; past it the lowest
    `importance_share·importance + rest·recency` of the agent's memories there go."""

    max_per_agent: int | None = 20_000
    importance_share: float = 0.7
    half_life_hours: float = 24.0 * 30


def refusal(backend: MemoryBackend, scope: str, max_items: int) -> str | None:
    """Why a new memory cannot go into `scope` (full, and none there may be evicted),
    or None if it can."""
    held = backend.count({"scope": scope})
    if held < max_items or backend.count({**EVICTABLE, "scope": scope}):
        return None
    return (
        f"{describe_scope(scope)} is full: it holds {held:,} memories ([memory] max_items "
        f"is {max_items:,}) and none may be evicted (each is a preference or a proposal "
        "a person decides about); forget some, or raise max_items in hive.toml"
    )


def check_room(backend: MemoryBackend, scope: str, max_items: int) -> None:
    """Raise `MemoryFullError` if a new memory cannot go into `scope`."""
    why = refusal(backend, scope, max_items)
    if why is not None:
        raise MemoryFullError(why)


def evict_over_capacity(backend: MemoryBackend, max_items: int, scope: str) -> list[str]:
    """Past `max_items` in `scope`, delete 10 % of the cap (at least the overflow) there:
    lowest importance, then oldest. Returns the deleted ids (all of `scope`)."""
    total = backend.count({"scope": scope})
    if total <= max_items:
        return []
    n = max(total - max_items, int(max_items * EVICT_SHARE))
    victims = backend.query(
        {**EVICTABLE, "scope": scope}, limit=n, order_by=["importance", "created_at"]
    )
    ids = [r.id for r in victims]
    backend.delete_many(ids, scope=scope)
    return ids


def prune_agent(
    backend: MemoryBackend, agent: str, policy: RetentionPolicy, at: datetime, scope: str
) -> list[str]:
    """Bring one agent's memories in `scope` back under its cap; returns the deleted ids."""
    cap = policy.max_per_agent
    if cap is None:
        return []
    mine: Filters = {**EVICTABLE, "agent": agent, "scope": scope}
    counts = counting(backend)
    total = counts.evictable_count(agent, scope) if counts is not None else backend.count(mine)
    if total <= cap:
        return []
    share = policy.importance_share

    def keep_score(r_importance: float, r_recency: float) -> float:
        return share * r_importance + (1 - share) * r_recency

    def score(c: PruneCandidate) -> float:
        return keep_score(
            c.importance, recency_of(c.last_accessed, c.created_at, at, policy.half_life_hours)
        )

    ranked = sorted(_candidates(backend, mine), key=score)  # stable: oldest first on ties
    ids = [c.id for c in ranked[: total - cap]]
    backend.delete_many(ids, scope=scope)
    return ids


def _candidates(backend: MemoryBackend, mine: Filters) -> list[PruneCandidate]:
    """`mine`'s records oldest first, as candidates; without building records if the
    backend can (an agent at its cap has thousands, and is pruned at every write)."""
    lean = ranking(backend)
    if lean is not None:
        return lean.prune_candidates(mine)
    return [
        PruneCandidate(r.id, r.importance, r.created_at, r.last_accessed)
        for r in backend.query(mine, order_by="created_at")
    ]
