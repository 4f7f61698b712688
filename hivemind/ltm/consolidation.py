"""Working → episodic consolidation at task end (seed 004).

A HISTORY block becomes a long-term episodic memory when its importance reaches
the threshold (0.7 by default): the block's own `metadata["importance"]` if the
agent set one, else the heuristic on its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from hivemind.ltm.importance import heuristic_importance
from hivemind.memory.blocks import HistoryBlock


@dataclass(frozen=True)
class Memorable:
    """A HISTORY block worth keeping, with the text and importance it will be stored with."""

    block_id: str
    content: str
    importance: float
    happened_at: datetime


def block_importance(block: HistoryBlock) -> float:
    """`metadata["importance"]` (0–1, or 1–10 read as tenths) if usable, else the heuristic."""
    given = block.metadata.get("importance")
    if isinstance(given, int | float) and not isinstance(given, bool) and given >= 0:
        value = float(given)
        return min(1.0, value / 10.0 if value > 1.0 else value)
    return _text_importance(block.inline_content())


# A block is judged again at every task end of its cycle: the heuristic is pure, so its
# verdict on a text is kept.
_text_importance = lru_cache(maxsize=4096)(heuristic_importance)


def memorable(history: Sequence[HistoryBlock], threshold: float) -> list[Memorable]:
    """The blocks of `history` whose importance is at least `threshold`, in order."""
    picked: list[Memorable] = []
    for block in history:
        content = block.inline_content().strip()
        importance = block_importance(block)
        if content and importance >= threshold:
            picked.append(Memorable(block.id, content, importance, block.timestamp))
    return picked
