"""WorkingMemoryManager: one block per id, typed views, confidence updates."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hivemind.memory.blocks import BlockType, FileBlock, HistoryBlock, Priority, StatusBlock
from hivemind.memory.manager import WorkingMemoryManager


def test_starts_empty_with_its_token_limit() -> None:
    manager = WorkingMemoryManager(max_tokens=50_000)
    assert len(manager) == 0
    assert manager.max_tokens == 50_000
    assert WorkingMemoryManager().max_tokens == 100_000


def test_a_block_with_the_same_id_replaces_the_old_one() -> None:
    manager = WorkingMemoryManager()
    manager.add(FileBlock(location="a.py", priority=Priority.LOW))
    manager.add(FileBlock(location="a.py", priority=Priority.HIGH))
    assert len(manager) == 1
    block = manager.get("a.py")
    assert block is not None and block.priority is Priority.HIGH


def test_remove_says_whether_there_was_a_block() -> None:
    manager = WorkingMemoryManager()
    manager.add(FileBlock(location="a.py"))
    assert manager.remove("a.py") is True
    assert manager.remove("a.py") is False
    assert "a.py" not in manager


def test_contains_accepts_an_id_or_the_block_itself() -> None:
    manager = WorkingMemoryManager()
    block = FileBlock(location="a.py")
    manager.add(block)
    assert "a.py" in manager
    assert block in manager
    assert FileBlock(location="a.py") not in manager  # an equal copy is not the held block


def test_update_confidence_changes_the_held_block() -> None:
    manager = WorkingMemoryManager()
    manager.add(FileBlock(location="a.py"))
    assert manager.update_confidence("a.py", 0.25) is True
    block = manager.get("a.py")
    assert block is not None and block.confidence == 0.25
    assert manager.update_confidence("missing", 0.5) is False


def test_update_confidence_refuses_values_outside_0_to_1() -> None:
    manager = WorkingMemoryManager()
    manager.add(FileBlock(location="a.py"))
    with pytest.raises(ValidationError):
        manager.update_confidence("a.py", 1.5)


def test_by_type_and_clear_by_type() -> None:
    manager = WorkingMemoryManager()
    manager.add(FileBlock(location="a.py"))
    manager.add(HistoryBlock(action="read_file", detail="a.py"))
    manager.add(HistoryBlock(action="write_file", detail="b.py"))
    manager.add(StatusBlock(status_type="mail", value=2))
    assert [b.type for b in manager.by_type(BlockType.HISTORY)] == [BlockType.HISTORY] * 2
    assert manager.clear(BlockType.HISTORY) == 2
    assert sorted(b.type.value for b in manager.blocks()) == ["file", "status"]
    assert manager.clear() == 2
    assert len(manager) == 0


def test_blocks_keep_insertion_order_and_are_a_copy() -> None:
    manager = WorkingMemoryManager()
    for name in ("c.py", "a.py", "b.py"):
        manager.add(FileBlock(location=name))
    listed = manager.blocks()
    assert [b.id for b in listed] == ["c.py", "a.py", "b.py"]
    listed.clear()
    assert len(manager) == 3


def _by_type_scan(manager: WorkingMemoryManager, block_type: BlockType) -> list[str]:
    """What by_type must equal: the blocks of that type in the order of blocks()."""
    return [b.id for b in manager.blocks() if b.type is block_type]


def test_by_type_follows_the_order_of_blocks_through_replacements_and_type_changes() -> None:
    from hivemind.memory.blocks import KnowledgeBlock

    manager = WorkingMemoryManager()
    manager.add(FileBlock(location="knowledge/b.md"))
    manager.add(KnowledgeBlock(topic="a", location="knowledge/a.md"))
    manager.add(FileBlock(location="src/x.py"))
    manager.add(KnowledgeBlock(topic="c", location="knowledge/c.md"))
    # read_file of a note replaces its KNOWLEDGE block by a FILE block of the same id,
    # and the next perceive puts the KNOWLEDGE block back: the id keeps its first place.
    manager.add(KnowledgeBlock(topic="b", location="knowledge/b.md"))
    manager.add(FileBlock(location="knowledge/c.md"))
    manager.add(FileBlock(location="src/x.py", priority=Priority.HIGH))
    for kind in BlockType:
        assert [b.id for b in manager.by_type(kind)] == _by_type_scan(manager, kind)
    assert [b.id for b in manager.by_type(BlockType.KNOWLEDGE)] == [
        "knowledge/b.md", "knowledge/a.md"
    ]
    manager.remove("knowledge/b.md")
    assert manager.clear(BlockType.FILE) == 2
    for kind in BlockType:
        assert [b.id for b in manager.by_type(kind)] == _by_type_scan(manager, kind)
    assert [b.id for b in manager.blocks()] == ["knowledge/a.md"]
