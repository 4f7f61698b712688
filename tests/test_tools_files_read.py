"""read_file reads a bounded part of a file and says exactly what it shows: the lines
that fit the result, the next start_line, and a FILE block pinned to those lines."""

from __future__ import annotations

import pytest

from hivemind.hive.layout import Hive
from hivemind.memory.blocks import BlockType, FileBlock
from hivemind.tools import excerpt
from hivemind.tools.base import MAX_RESULT_CHARS, ToolContext
from tests.test_tools import call, make_ctx


def pinned(ctx: ToolContext) -> list[tuple[str, int | None, int | None]]:
    blocks = [b for b in ctx.working.by_type(BlockType.FILE) if isinstance(b, FileBlock)]
    return [(b.location, b.start_line, b.end_line) for b in blocks]


def numbered(content: str) -> list[int]:
    return [int(line[:5]) for line in content.splitlines()[1:] if line[:5].strip().isdigit()]


async def test_a_reversed_range_is_an_error_result(hive: Hive) -> None:
    (hive.workspace_dir / "ten.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/ten.txt",
                                   start_line=5, end_line=2)

    assert is_error
    assert content == "end_line 2 is before start_line 5: the range is reversed"
    assert pinned(ctx) == []


async def test_start_line_just_past_the_last_line_is_an_error_result(hive: Hive) -> None:
    (hive.workspace_dir / "ten.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/ten.txt", start_line=11)

    assert is_error
    assert content == "workspace/ten.txt has 10 lines; start_line 11 is past the end"


async def test_the_header_names_the_lines_that_fit_the_result(hive: Hive) -> None:
    (hive.workspace_dir / "long.txt").write_text(
        "".join(f"{'x' * 60} {i}\n" for i in range(1, 3001))
    )
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/long.txt")

    assert not is_error
    shown = numbered(content)
    last = shown[-1]
    assert shown == list(range(1, last + 1))
    assert 200 < last < 2000
    assert content.splitlines()[0] == f"workspace/long.txt (lines 1-{last} of 3000)"
    assert content.splitlines()[-1] == (
        f"[... {3000 - last} more lines; ask for start_line={last + 1}]"
    )
    assert len(content) <= MAX_RESULT_CHARS
    assert pinned(ctx) == [("workspace/long.txt", 1, last)]


async def test_the_next_start_line_goes_on_where_the_last_result_stopped(hive: Hive) -> None:
    (hive.workspace_dir / "long.txt").write_text(
        "".join(f"{'x' * 60} {i}\n" for i in range(1, 3001))
    )
    ctx = make_ctx(hive)
    first, _ = await call(ctx, "read_file", path="workspace/long.txt")
    last = numbered(first)[-1]

    content, is_error = await call(ctx, "read_file", path="workspace/long.txt",
                                   start_line=last + 1)

    assert not is_error
    assert numbered(content)[0] == last + 1
    assert content.splitlines()[1].endswith(f" {last + 1}")


async def test_a_line_longer_than_a_result_is_cut_with_a_marker(hive: Hive) -> None:
    (hive.workspace_dir / "one.txt").write_text("y" * 100_000 + "\nshort\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/one.txt")

    assert not is_error
    lines = content.splitlines()
    assert lines[0] == "workspace/one.txt (lines 1-1 of 2)"
    assert lines[1].startswith("    1  yyyy")
    shown = len(lines[1]) - 7
    assert lines[2] == f"[... line 1 is cut here; {100_000 - shown} more bytes of it are not shown]"
    assert lines[3] == "[... 1 more lines; ask for start_line=2]"
    assert "more characters cut" not in content
    assert pinned(ctx) == [("workspace/one.txt", 1, 1)]


async def test_a_file_is_read_no_further_than_the_scan_limit(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(excerpt, "MAX_SCAN_BYTES", 10_000)
    (hive.workspace_dir / "log.txt").write_text("".join(f"entry {i:05}\n" for i in range(5000)))
    ctx = make_ctx(hive)

    head, head_error = await call(ctx, "read_file", path="workspace/log.txt", end_line=3)
    far, far_error = await call(ctx, "read_file", path="workspace/log.txt", start_line=4000)

    assert not head_error
    assert head.splitlines() == [
        "workspace/log.txt (lines 1-3 of a 60000 byte file)",
        "    1  entry 00000",
        "    2  entry 00001",
        "    3  entry 00002",
    ]
    assert far_error
    assert far == (
        "workspace/log.txt: line 4000 is not within the first 10000 bytes of this 60000 "
        "byte file, and read_file reads no further"
    )


async def test_a_huge_sparse_file_is_found_binary_from_its_first_bytes(hive: Hive) -> None:
    with (hive.workspace_dir / "sparse.bin").open("wb") as fh:
        fh.truncate(3 * 1024**3)  # no disk used; reading it whole would take 3 GB
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/sparse.bin")

    assert is_error
    assert content == "workspace/sparse.bin: binary file, not shown"


async def test_crlf_line_ends_are_not_shown(hive: Hive) -> None:
    (hive.workspace_dir / "dos.txt").write_bytes(b"one\r\ntwo\r\nthree")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/dos.txt", start_line=2)

    assert not is_error
    assert content == "workspace/dos.txt (lines 2-3 of 3)\n    2  two\n    3  three"
    assert pinned(ctx) == [("workspace/dos.txt", 2, 3)]


async def test_a_whole_small_file_is_pinned_whole(hive: Hive) -> None:
    (hive.workspace_dir / "notes.md").write_text("a\nb\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/notes.md")

    assert not is_error
    assert content == "workspace/notes.md (lines 1-2 of 2)\n    1  a\n    2  b"
    assert pinned(ctx) == [("workspace/notes.md", None, None)]
