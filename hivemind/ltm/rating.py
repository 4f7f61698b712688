"""Importance rated by the writing agent's own model: many memories per call, on a budget.

A memory written without an importance gets the free heuristic and waits
(`importance_by = heuristic`) in its agent's queue, oldest first. After a cycle
that called the model anyway, the agent may send one more request that rates the
head of its queue (`RatingBatch`): never a request of its own on an idle hive. The
tokens it spends are kept per agent in the store's meta table against the agent's
own, and rating stops while they exceed `[memory] rating_share` (5 %) of them.

The model answers one `number: rating` line per memory on a 1–10 scale; a line that
names no memory of the batch, a rating out of range or plain prose is ignored (the
memory keeps waiting), never an error. A request that rates nothing (or fails) halves
the share until one rates again, so a model that cannot rate soon costs next to
nothing. A rating replaces the heuristic importance in SQLite, so retrieval ranks by
it at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hivemind.ltm.backend import MemoryBackend
from hivemind.ltm.records import ImportanceSource, MemoryRecord

RATING_PROMPT = (
    "You rate memories an agent keeps for its future work. For each numbered memory, "
    "rate how much it will matter later, from 1 (trivial: small talk, a passing remark, "
    "a question) to 10 (crucial: a decision, a failure and its cause, a commitment, a "
    "deadline, a person's stated preference or a hard-won fact). Reply with one line per "
    "memory, `number: rating`, and nothing else."
)
MAX_BATCH = 32
SHOWN_CHARS = 600
"""A memory is shown to the rater cut to this length: enough to judge it, cheap to send."""
_PROMPT_TOKENS = 110  # the instructions above, and the request's own overhead
_TOKENS_PER_LINE = 12  # a memory's number and framing, and its answer line
_CHARS_PER_TOKEN = 3  # over-estimates English a little: the budget is not overdrawn
# `3: 7`, `3. 7/10`, `**3** = 7`, `- 3) 7`; a minus before the rating is no separator.
_ANSWER = re.compile(
    r"^\W*(\d{1,3})(?:[\s*_\]).:=]|-(?!\d))+(\d{1,2}(?:\.\d+)?)\s*(?:/\s*10)?\W*$"
)


def _key(agent: str) -> str:
    return f"rating:{agent}"


@dataclass
class RatingBudget:
    """An agent's tokens and the tokens its ratings spent, as kept in the meta table."""

    agent_tokens: int = 0
    rating_tokens: int = 0
    misses: int = 0
    """Requests in a row that rated nothing (or failed): each halves the share."""

    def allowance(self, share: float) -> int:
        """Tokens a rating request may still spend (negative: over the budget)."""
        return int(share / 2 ** min(self.misses, 16) * self.agent_tokens) - self.rating_tokens

    @classmethod
    def load(cls, backend: MemoryBackend, agent: str) -> RatingBudget:
        raw = backend.meta_get(_key(agent))
        try:
            data = json.loads(raw) if raw else {}
            return cls(int(data.get("agent_tokens", 0)), int(data.get("rating_tokens", 0)),
                       int(data.get("misses", 0)))
        except (ValueError, TypeError, AttributeError):  # a damaged value: start again
            return cls()

    def save(self, backend: MemoryBackend, agent: str) -> None:
        value = {"agent_tokens": self.agent_tokens, "rating_tokens": self.rating_tokens,
                 "misses": self.misses}
        backend.meta_set(_key(agent), json.dumps(value))


def pending(backend: MemoryBackend, agent: str, limit: int = MAX_BATCH) -> list[MemoryRecord]:
    """The agent's memories that wait for a rating, oldest first."""
    return backend.query(
        {"agent": agent, "importance_by": ImportanceSource.HEURISTIC},
        limit=limit, order_by="created_at",
    )  # fmt: skip


def estimate_tokens(memories: Sequence[MemoryRecord]) -> int:
    """A generous estimate of what rating `memories` in one request costs, in and out."""
    text = sum(min(len(m.content), SHOWN_CHARS) for m in memories)
    return _PROMPT_TOKENS + text // _CHARS_PER_TOKEN + _TOKENS_PER_LINE * len(memories)


def fitting(memories: Sequence[MemoryRecord], allowance: int) -> list[MemoryRecord]:
    """The longest head of `memories` whose request fits in `allowance` tokens."""
    batch: list[MemoryRecord] = []
    for memory in memories[:MAX_BATCH]:
        if estimate_tokens([*batch, memory]) > allowance:
            break
        batch.append(memory)
    return batch


def batch_text(memories: Sequence[MemoryRecord]) -> str:
    """The numbered memories, as the rater reads them."""
    lines = []
    for number, memory in enumerate(memories, start=1):
        text = " ".join(memory.content.split())
        if len(text) > SHOWN_CHARS:
            text = text[: SHOWN_CHARS - 1] + "…"
        lines.append(f"{number}. {text}")
    return "\n".join(lines)


def parse_ratings(answer: str, count: int) -> dict[int, float]:
    """Position (0-based) → importance 0–1 from the model's `number: rating` lines.

    Lines that are not of that form, numbers outside 1..`count`, ratings outside 1–10
    and repeats of a number already rated are ignored."""
    found: dict[int, float] = {}
    for line in answer.splitlines():
        match = _ANSWER.match(line.strip())
        if match is None:
            continue
        number, rating = int(match[1]), float(match[2])
        if not 1 <= number <= count or not 1.0 <= rating <= 10.0 or number - 1 in found:
            continue
        found[number - 1] = round((rating - 1.0) / 9.0, 3)
    return found


def apply_ratings(
    backend: MemoryBackend, memories: Sequence[MemoryRecord], ratings: dict[int, float]
) -> dict[str, tuple[float, float]]:
    """Store the ratings (importance_by = model); returns id → (old, new) importance."""
    changed: dict[str, tuple[float, float]] = {}
    rated: list[MemoryRecord] = []
    with backend.transaction():
        fresh = {m.ref: m for m in backend.get_many([m.id for m in memories])}
        for position, importance in sorted(ratings.items()):
            memory = fresh.get(memories[position].ref)
            if memory is None or memory.importance_by is not ImportanceSource.HEURISTIC:
                continue  # forgotten, or rated by someone else, meanwhile
            changed[memory.id] = (memory.importance, importance)
            update = {"importance": importance, "importance_by": ImportanceSource.MODEL}
            rated.append(memory.model_copy(update=update))
        if rated:
            backend.add_many(rated)
    return changed
