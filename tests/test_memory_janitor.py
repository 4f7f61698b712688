"""MemoryJanitor: expiry, doubtful LOW blocks, old history, history FIFO."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hivemind.memory.blocks import FileBlock, HistoryBlock, Priority, StatusBlock
from hivemind.memory.janitor import MemoryJanitor
from hivemind.memory.manager import WorkingMemoryManager

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def memory(*blocks: object) -> WorkingMemoryManager:
    manager = WorkingMemoryManager()
    for b in blocks:
        manager.add(b)  # type: ignore[arg-type]
    return manager


def test_expired_blocks_are_removed() -> None:
    manager = memory(
        StatusBlock(status_type="old", expiry=NOW - timedelta(seconds=1)),
        StatusBlock(status_type="live", expiry=NOW + timedelta(minutes=5)),
    )
    assert MemoryJanitor().sweep(manager, now=NOW) == ["status:old"]
    assert "status:live" in manager


def test_low_blocks_under_a_tenth_of_confidence_are_removed() -> None:
    manager = memory(
        FileBlock(location="doubtful.py", priority=Priority.LOW, confidence=0.05),
        FileBlock(location="borderline.py", priority=Priority.LOW, confidence=0.1),
        FileBlock(location="medium.py", priority=Priority.MEDIUM, confidence=0.05),
    )
    assert MemoryJanitor().sweep(manager, now=NOW) == ["doubtful.py"]
    assert len(manager) == 2


def test_history_older_than_an_hour_goes_unless_high() -> None:
    old = NOW - timedelta(hours=1, seconds=1)
    manager = memory(
        HistoryBlock(id="h-old", action="read_file", timestamp=old),
        HistoryBlock(id="h-old-high", action="decided", timestamp=old, priority=Priority.HIGH),
        HistoryBlock(id="h-recent", action="read_file", timestamp=NOW - timedelta(minutes=59)),
    )
    assert MemoryJanitor().sweep(manager, now=NOW) == ["h-old"]
    assert {b.id for b in manager.blocks()} == {"h-old-high", "h-recent"}


def test_history_beyond_capacity_keeps_the_newest() -> None:
    manager = memory(
        *(
            HistoryBlock(id=f"h{i}", action="step", timestamp=NOW - timedelta(minutes=30 - i))
            for i in range(10)
        )
    )
    removed = MemoryJanitor(history_capacity=3).sweep(manager, now=NOW)
    assert removed == [f"h{i}" for i in range(7)]
    assert sorted(b.id for b in manager.blocks()) == ["h7", "h8", "h9"]


def test_a_clean_memory_is_left_alone() -> None:
    manager = memory(FileBlock(location="a.py"), HistoryBlock(action="x", timestamp=NOW))
    assert MemoryJanitor().sweep(manager, now=NOW) == []
    assert len(manager) == 2
