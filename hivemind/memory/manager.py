"""The WorkingMemoryManager: an agent's symbolic memory, blocks indexed by id."""

from __future__ import annotations

from collections.abc import Iterator

from hivemind.memory.blocks import AnyBlock, BlockType


class WorkingMemoryManager:
    """Holds an agent's blocks (references, not text); one block per id."""

    def __init__(self, max_tokens: int = 100_000) -> None:
        self.max_tokens = max_tokens
        self._blocks: dict[str, AnyBlock] = {}

    def add(self, block: AnyBlock) -> None:
        """Add `block`; a block with the same id is replaced."""
        self._blocks[block.id] = block

    def remove(self, block_id: str) -> bool:
        """Remove the block `block_id`; False if there was none."""
        return self._blocks.pop(block_id, None) is not None

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
        return [b for b in self._blocks.values() if b.type == block_type]

    def blocks(self) -> list[AnyBlock]:
        """Every block, in the order they were first added."""
        return list(self._blocks.values())

    def clear(self, block_type: BlockType | None = None) -> int:
        """Remove every block (or every block of `block_type`); returns how many."""
        if block_type is None:
            n = len(self._blocks)
            self._blocks.clear()
            return n
        gone = [bid for bid, b in self._blocks.items() if b.type == block_type]
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
