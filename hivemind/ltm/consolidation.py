"""Working → episodic consolidation at task end (seed 004), and the promotion of a
task's memories that matter.

A HISTORY block becomes a long-term episodic memory when its importance reaches
the threshold (0.7 by default): the block's own `metadata["importance"]` if the
agent set one, else the heuristic on its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple

from hivemind.ltm import retention
from hivemind.ltm.backend import MemoryBackend
from hivemind.ltm.importance import heuristic_importance
from hivemind.ltm.records import MemoryRecord, Tier, new_memory_id
from hivemind.memory.blocks import HistoryBlock
from hivemind.settings import MemorySettings


@dataclass(frozen=True)
class Memorable:
    """A HISTORY block worth keeping, with the text and importance it will be stored with."""

    block_id: str
    content: str
    importance: float
    happened_at: datetime


def block_importance(block: HistoryBlock) -> float:
    """`metadata["importance"]` (0–1, or 1–10 read as tenths) if usable, else the heuristic."""
    return _importance(block, block.inline_content())


def _importance(block: HistoryBlock, text: str) -> float:
    """`block_importance` given the block's inline text (built once per block)."""
    given = block.metadata.get("importance")
    if isinstance(given, int | float) and not isinstance(given, bool) and given >= 0:
        value = float(given)
        return min(1.0, value / 10.0 if value > 1.0 else value)
    return _text_importance(text)


# A block is judged again at every task end of its cycle: the heuristic is pure, so its
# verdict on a text is kept.
_text_importance = lru_cache(maxsize=4096)(heuristic_importance)

# block id → (action, detail, result, inline text): the text is handed out again, the
# same string object, while the block still holds the very same field objects. Its hash
# is then already computed, so `_text_importance` answers at the cost of a dict lookup,
# and the text is not built again.
_TEXTS_KEPT = 4096
_texts: dict[str, tuple[str, str, str | None, str]] = {}


def _inline_text(block: HistoryBlock) -> str:
    """`block.inline_content()`, kept per block while its action, detail and result are
    the same objects (strings are immutable: then the text is the same)."""
    if type(block) is not HistoryBlock:  # a subclass may build its text from more fields
        return block.inline_content()
    action, detail, result = block.action, block.detail, block.result
    kept = _texts.get(block.id)
    if kept is not None and kept[0] is action and kept[1] is detail and kept[2] is result:
        return kept[3]
    text = block.inline_content()
    if len(_texts) >= _TEXTS_KEPT:
        _texts.clear()
    _texts[block.id] = (action, detail, result, text)
    return text


def memorable(history: Sequence[HistoryBlock], threshold: float) -> list[Memorable]:
    """The blocks of `history` whose importance is at least `threshold`, in order."""
    picked: list[Memorable] = []
    for block in history:
        text = _inline_text(block)
        content = text.strip()
        importance = _importance(block, text)
        if content and importance >= threshold:
            picked.append(Memorable(block.id, content, importance, block.timestamp))
    return picked


class Promotion(NamedTuple):
    """What a task end does with the task's memories."""

    kept: list[MemoryRecord]
    """Copies moved up to the project (or global) tier, ids fresh where taken there."""
    cleared: list[str]
    """Ids of the task memories dropped with the task."""
    refused: list[str]
    """Why nothing was kept: the scope above was full with nothing it may evict."""


def promote(
    backend: MemoryBackend,
    task_memories: Sequence[MemoryRecord],
    settings: MemorySettings,
    target: str,
) -> Promotion:
    """Keep the task memories of importance at least `consolidate_importance`, moved up to
    `target` (their project's scope, or the global one). One whose id is taken there gets
    a fresh id: the memory that had it belongs to that scope and stays as it is."""
    threshold = settings.consolidate_importance
    keep = [r.model_copy() for r in task_memories if r.importance >= threshold]
    why = retention.refusal(backend, target, settings.max_items) if keep else None
    if why is not None:
        return Promotion([], [r.id for r in task_memories], [why])
    for record in keep:
        record.tier = Tier.PROJECT if record.project else Tier.GLOBAL
    taken = {r.id for r in backend.get_many([r.id for r in keep], scope=target)} if keep else set()
    for record in keep:
        if record.id in taken:
            record.id = new_memory_id()
    cleared = [r.id for r in task_memories if r.importance < threshold]
    return Promotion(keep, cleared, [])
