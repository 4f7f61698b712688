"""What each block type says of itself: its place in the context, where its text lives."""

from __future__ import annotations

from typing import get_args

import pytest

from hivemind.memory.blocks import (
    AnyBlock,
    FileBlock,
    MemoryBlockBase,
    MessageBlock,
    RomBlock,
    StatusBlock,
    TaskBlock,
)

BLOCK_TYPES: tuple[type[MemoryBlockBase], ...] = get_args(AnyBlock)


def test_every_block_type_has_a_place_of_its_own_and_the_stable_ones_come_first() -> None:
    ranks = [t.rank for t in BLOCK_TYPES]
    assert len(set(ranks)) == len(BLOCK_TYPES)
    stable = [t.rank for t in BLOCK_TYPES if t.stable]
    volatile = [t.rank for t in BLOCK_TYPES if not t.stable]
    assert stable and max(stable) < min(volatile)


@pytest.mark.parametrize(
    ("block", "span"),
    [
        pytest.param(RomBlock(agent="a", location="agents/a/ROM.md"),
                     ("agents/a/ROM.md", None, None), id="rom"),
        pytest.param(FileBlock(location="src/a.py", start_line=3, end_line=9),
                     ("src/a.py", 3, 9), id="file-range"),
        pytest.param(TaskBlock(task_id="t", location="tasks/t.md"), ("tasks/t.md", None, None),
                     id="task-file"),
        pytest.param(TaskBlock(task_id="t", description="do it"), None, id="task-inline"),
        pytest.param(MessageBlock(from_agent="a", to_agent="b", full_path="m/1.md", body="hi"),
                     None, id="message-with-body"),
        pytest.param(StatusBlock(status_type="s", value=1), None, id="status"),
    ],
)
def test_a_block_names_the_file_its_text_is_loaded_from_or_none_when_inline(
    block: AnyBlock, span: tuple[str, int | None, int | None] | None
) -> None:
    assert block.span() == span


def test_only_the_rom_is_sent_whole_or_not_at_all() -> None:
    assert [t.__name__ for t in BLOCK_TYPES if not t.compressible] == ["RomBlock"]
