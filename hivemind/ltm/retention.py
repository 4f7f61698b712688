"""Keeping the store bounded: eviction over `max_items`, per-agent importance-weighted pruning.

Approved global preferences and proposals waiting for a person are never
removed by either: a person decided about them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hivemind.ltm.backend import Filters, MemoryBackend, PruneCandidate, counting, ranking
from hivemind.ltm.records import MemoryStatus
from hivemind.ltm.retrieval import recency_of

EVICT_SHARE = 0.10

# Everything a person did not decide about.
EVICTABLE: Filters = {"preference": False, "status": MemoryStatus.ACTIVE}


@dataclass(frozen=True)
class RetentionPolicy:
    """Per-agent cap; past it the lowest `importance_share·importance + rest·recency` go."""

    max_per_agent: int | None = 20_000
    importance_share: float = 0.7
    half_life_hours: float = 24.0 * 30


def evict_over_capacity(backend: MemoryBackend, max_items: int) -> list[str]:
    """Past `max_items`, delete 10 % of the cap (at least the overflow): lowest importance,
    then oldest. Returns the deleted ids."""
    total = backend.count()
    if total <= max_items:
        return []
    n = max(total - max_items, int(max_items * EVICT_SHARE))
    victims = backend.query(EVICTABLE, limit=n, order_by=["importance", "created_at"])
    ids = [r.id for r in victims]
    backend.delete_many(ids)
    return ids


def prune_agent(
    backend: MemoryBackend, agent: str, policy: RetentionPolicy, at: datetime
) -> list[str]:
    """Bring one agent's memories back under its cap; returns the deleted ids."""
    cap = policy.max_per_agent
    if cap is None:
        return []
    mine: Filters = {**EVICTABLE, "agent": agent}
    counts = counting(backend)
    total = counts.evictable_count(agent) if counts is not None else backend.count(mine)
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
    backend.delete_many(ids)
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
