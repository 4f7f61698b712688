"""The WorkingMemoryManager: an agent's symbolic memory, blocks indexed by id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hivemind.memory.blocks import AnyBlock, BlockType


class WorkingMemoryManager:
    """Holds an agent's blocks (references, not text); one block per id."""

    def __init__(self, max_tokens: int = 100_000) -> None:
        self.max_tokens = max_tokens
        self._blocks: dict[str, AnyBlock] = {}
        # The same blocks per type, in the order of `_blocks`: perceive asks for one type
        # at a time, several times a cycle, while history makes up most of the memory.
        self._typed: dict[BlockType, dict[str, AnyBlock]] = {}
        # Bookkeeping of the code that fills this memory (perceive keeps which blocks it
        # made here), by that code's own key; lives and dies with the memory.
        self.scratch: dict[str, Any] = {}

    def add(self, block: AnyBlock) -> None:
        """Add `block`; a block with the same id is replaced."""
        bid, kind = block.id, block.type
        old = self._blocks.get(bid)
        self._blocks[bid] = block
        if old is not None and old.type is not kind:
            del self._typed[old.type][bid]
            # The id keeps its place in `_blocks`: rebuild the type's order from it.
            self._typed[kind] = {k: b for k, b in self._blocks.items() if b.type is kind}
            return
        typed = self._typed.get(kind)
        if typed is None:
            typed = self._typed[kind] = {}
        typed[bid] = block

    def remove(self, block_id: str) -> bool:
        """Remove the block `block_id`; False if there was none."""
        block = self._blocks.pop(block_id, None)
        if block is None:
            return False
        del self._typed[block.type][block_id]
        return True

    def get(self, block_id: str) -> AnyBlock | None:
        return self._blocks.get(block_id)

    def update_confidence(self, block_id: str, confidence: float) -> bool:
        """Set a block's confidence (0..1, else ValueError); False if the id is unknown."""
        block = self._blocks.get(block_id)
        if block is None:
            return False
        block.confidence = confidence
        return True

    def by_type(self, block_type: BlockType) -> list[AnyBlock]:
        """The blocks of one type, in the order they were first added."""
        typed = self._typed.get(block_type)
        return list(typed.values()) if typed else []

    def blocks(self) -> list[AnyBlock]:
        """Every block, in the order they were first added."""
        return list(self._blocks.values())

    def clear(self, block_type: BlockType | None = None) -> int:
        """Remove every block (or every block of `block_type`); returns how many."""
        if block_type is None:
            n = len(self._blocks)
            self._blocks.clear()
            self._typed.clear()
            return n
        gone = list(self._typed.pop(block_type, {}))
        for bid in gone:
            del self._blocks[bid]
        return len(gone)

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self._blocks
        bid = getattr(item, "id", None)
        return isinstance(bid, str) and self._blocks.get(bid) is item

    def __iter__(self) -> Iterator[AnyBlock]:
        return iter(list(self._blocks.values()))

    def __repr__(self) -> str:
        return f"WorkingMemoryManager({len(self)} blocks, max_tokens={self.max_tokens})"
