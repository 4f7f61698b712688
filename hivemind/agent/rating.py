"""One importance-rating request after a cycle's own model calls (`hivemind.ltm.rating`).

Only a cycle that called the model (so never an idle hive), only with a real model
(the offline provider keeps the heuristic), only within the agent's rating budget.
The request's tokens count in the cycle's usage, so daily and per-task budgets and
the audit record see them; what it rated is one `rate` entry among the cycle's
memory operations. A failed or unusable answer costs the cycle nothing else.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hivemind.errors import ModelError
from hivemind.llm.base import ModelRequest, Provider, Usage
from hivemind.ltm.rating import (
    RATING_PROMPT,
    RatingBudget,
    apply_ratings,
    batch_text,
    fitting,
    parse_ratings,
    pending,
)
from hivemind.ltm.store import LongTermMemory


class ImportanceRating:
    """An agent's rating of its own memories; remembers its tokens not yet saved."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self._unsaved = 0  # the agent's tokens since its budget was last written

    async def after_cycle(
        self,
        ltm: LongTermMemory | None,
        provider: Provider,
        model: str,
        spent: int,
        share: float,
        slots: asyncio.Semaphore,
    ) -> tuple[Usage, dict[str, Any] | None]:
        """Rate the head of the queue if the budget allows, after a cycle whose own calls
        spent `spent` tokens; returns the rating's usage and its audit entry (or None)."""
        self._unsaved += spent
        if ltm is None or provider.offline or share <= 0 or spent <= 0:
            return Usage(), None
        waiting = await asyncio.to_thread(pending, ltm.backend, self.agent)
        if not waiting:
            return Usage(), None  # nothing to rate: no write either
        budget = await asyncio.to_thread(RatingBudget.load, ltm.backend, self.agent)
        budget.agent_tokens += self._unsaved
        self._unsaved = 0
        batch = fitting(waiting, budget.allowance(share))
        if not batch:
            await asyncio.to_thread(budget.save, ltm.backend, self.agent)
            return Usage(), None
        request = ModelRequest(
            agent=self.agent, model=model, system=RATING_PROMPT, context_stable="",
            context_volatile=batch_text(batch), max_output_tokens=8 * len(batch) + 16,
            temperature=0.0,
        )  # fmt: skip
        entry: dict[str, Any] = {"op": "rate", "asked": [m.id for m in batch]}
        try:
            async with slots:
                response = await provider.complete(request)
        except ModelError as exc:  # the cycle's own work is done; the queue waits
            budget.misses += 1
            await asyncio.to_thread(budget.save, ltm.backend, self.agent)
            return Usage(), {**entry, "error": str(exc)}
        used = response.usage
        ratings = parse_ratings(response.text, len(batch))
        budget.rating_tokens += used.total_input + used.output_tokens
        budget.misses = 0 if ratings else budget.misses + 1
        await asyncio.to_thread(budget.save, ltm.backend, self.agent)
        changed = await asyncio.to_thread(apply_ratings, ltm.backend, batch, ratings)
        entry["rated"] = {i: [old, new] for i, (old, new) in changed.items()}
        entry["tokens"] = used.total_input + used.output_tokens
        return used, entry
