"""The MemoryJanitor: removes blocks that no longer earn their place in working memory.

It sweeps after each cycle that ran, so a block marked for going (a FILE block whose
file perception found gone) was offered to that cycle's context once (the selector
may still have left it out for the budget).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hivemind.clock import utcnow
from hivemind.memory.blocks import AnyBlock, BlockType, FileBlock, HistoryBlock, Priority
from hivemind.memory.earlier import fold
from hivemind.memory.manager import WorkingMemoryManager

LOW_CONFIDENCE = 0.1
HISTORY_MAX_AGE = timedelta(hours=1)
"""History older than this goes (a step of a task still held: to the earlier steps)."""


class MemoryJanitor:
    """Sweeps expired blocks, FILE blocks whose file is gone, doubtful LOW blocks, old
    history and history past its capacity."""

    def __init__(
        self, history_max_age: float = HISTORY_MAX_AGE.total_seconds(), history_capacity: int = 50
    ) -> None:
        if history_capacity < 0:
            raise ValueError(f"history_capacity must be >= 0, got {history_capacity}")
        self.history_max_age = timedelta(seconds=history_max_age)
        self.history_capacity = history_capacity

    def reason(self, block: AnyBlock, now: datetime) -> str | None:
        """Why `block` should go regardless of the others (None = it may stay)."""
        if block.is_expired(now):
            return "expired"
        if isinstance(block, FileBlock) and block.gone:
            # Perception found its file gone before the cycle: the context showed that.
            return "its file is gone"
        if block.priority is Priority.LOW and block.confidence < LOW_CONFIDENCE:
            return f"LOW with confidence {block.confidence} < {LOW_CONFIDENCE}"
        if block.type is BlockType.HISTORY and block.priority > Priority.HIGH:
            ts = block.timestamp if block.timestamp.tzinfo else block.timestamp.replace(tzinfo=UTC)
            if now - ts > self.history_max_age:
                return f"history older than {self.history_max_age}"
        return None

    def sweep(self, manager: WorkingMemoryManager, now: datetime | None = None) -> list[str]:
        """Remove what should go from `manager`; returns the removed ids, in that order."""
        now = now or utcnow()
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        gone = [b for b in manager.blocks() if self.reason(b, now) is not None]
        removed = [b.id for b in gone]
        for bid in removed:
            manager.remove(bid)
        # Steps of tasks still held become lines of the earlier-steps block, not nothing
        # (a finished task's steps were compacted by the cycle before this sweep).
        old_steps = [b for b in gone if isinstance(b, HistoryBlock) and not b.is_expired(now)]
        # FIFO: the oldest history goes first; CRITICAL history is pinned on purpose.
        history = sorted(
            (b for b in manager.by_type(BlockType.HISTORY) if b.priority is not Priority.CRITICAL),
            key=lambda b: b.timestamp.timestamp(),
        )
        pinned = len(manager.by_type(BlockType.HISTORY)) - len(history)
        excess = len(history) + pinned - self.history_capacity
        for b in history[: max(0, excess)]:
            manager.remove(b.id)
            removed.append(b.id)
            if isinstance(b, HistoryBlock):
                old_steps.append(b)
        fold(manager, old_steps)
        return removed
