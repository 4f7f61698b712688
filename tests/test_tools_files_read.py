"""read_file reads a bounded part of a file and says exactly what it shows: the lines
that fit the result, the next start_line, and a FILE block pinned to those lines."""

from __future__ import annotations

import io
import re

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
    assert lines[2] == (
        f"[... line 1 is cut here; {100_000 - shown} more characters of it are not shown; "
        f"ask for start_line=1, start_char={shown}]"
    )
    assert lines[3] == "[... 1 more lines; ask for start_line=2]"
    assert "more characters cut" not in content
    assert pinned(ctx) == [("workspace/one.txt", 1, 1)]


def cut_at(content: str) -> int | None:
    """The start_char a result's cut note asks for next; None when nothing is cut."""
    found = re.search(r"ask for start_line=\d+, start_char=(\d+)\]", content)
    return int(found.group(1)) if found else None


async def test_following_the_cut_notes_reads_a_long_line_whole(hive: Hive) -> None:
    line = "".join(f"{i:07}," for i in range(12_500))  # 100 000 characters, one line
    (hive.workspace_dir / "one.json").write_text(line + "\n")
    ctx = make_ctx(hive)

    pieces, start_char, calls = [], 0, 0
    while start_char is not None and calls < 20:
        content, is_error = await call(ctx, "read_file", path="workspace/one.json",
                                       start_char=start_char)
        assert not is_error, content
        pieces.append(content.splitlines()[1].removeprefix("    1  "))
        start_char, calls = cut_at(content), calls + 1

    assert "".join(pieces) == line
    assert 5 <= calls < 20


async def test_a_read_from_a_character_says_where_it_starts(hive: Hive) -> None:
    (hive.workspace_dir / "one.txt").write_text("y" * 30_000 + "z" * 10 + "\nshort\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/one.txt",
                                   start_char=30_000)

    assert not is_error
    assert content == (
        "workspace/one.txt (lines 1-2 of 2, line 1 from character 30000)\n"
        "    1  zzzzzzzzzz\n"
        "    2  short"
    )
    assert pinned(ctx) == [("workspace/one.txt", 1, 2)]


async def test_start_char_counts_characters_not_bytes(hive: Hive) -> None:
    (hive.workspace_dir / "greek.txt").write_text("αβγδε\nζη\n", encoding="utf-8")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/greek.txt",
                                   start_line=1, end_line=1, start_char=3)

    assert not is_error
    assert content == "workspace/greek.txt (lines 1-1 of 2, line 1 from character 3)\n    1  δε"


async def test_a_long_line_of_many_byte_characters_reads_on_where_it_was_cut(
    hive: Hive,
) -> None:
    line = "é" * 25_000 + "€end"
    (hive.workspace_dir / "accents.txt").write_text(line, encoding="utf-8")
    ctx = make_ctx(hive)

    first, _ = await call(ctx, "read_file", path="workspace/accents.txt")
    start_char = cut_at(first)
    assert start_char is not None
    rest, is_error = await call(ctx, "read_file", path="workspace/accents.txt",
                                start_char=start_char)

    assert not is_error
    assert first.splitlines()[1][7:] + rest.splitlines()[1][7:] == line
    assert cut_at(rest) is None


@pytest.mark.parametrize(
    ("start_line", "start_char", "message"),
    [
        (1, 5, "workspace/short.txt: line 1 has 5 characters; start_char 5 is past its end "
               "(start_char counts from 0)"),
        (2, 1, "workspace/short.txt: line 2 has 0 characters; start_char 1 is past its end "
               "(start_char counts from 0)"),
        (1, -1, "invalid input for read_file: start_char: Input should be greater than or "
                "equal to 0"),
    ],
    ids=["at-the-end", "empty-line", "negative"],
)
async def test_a_start_char_outside_the_line_is_an_error_result(
    hive: Hive, start_line: int, start_char: int, message: str
) -> None:
    (hive.workspace_dir / "short.txt").write_text("abcde\n\nlast\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "read_file", path="workspace/short.txt",
                                   start_line=start_line, start_char=start_char)

    assert (content, is_error) == (message, True)
    assert pinned(ctx) == []


async def test_a_line_past_the_scan_limit_is_read_up_to_it_and_no_further(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(excerpt, "MAX_SCAN_BYTES", 30_000)
    (hive.workspace_dir / "huge.csv").write_text("c" * 50_000)
    ctx = make_ctx(hive)

    first, _ = await call(ctx, "read_file", path="workspace/huge.csv")
    start_char = cut_at(first)
    assert start_char is not None
    rest, rest_error = await call(ctx, "read_file", path="workspace/huge.csv",
                                  start_char=start_char)
    beyond, beyond_error = await call(ctx, "read_file", path="workspace/huge.csv",
                                      start_char=40_000)

    assert f"{30_000 - start_char}+ more characters of it are not shown" in first
    assert not rest_error
    assert rest.splitlines()[0] == (
        f"workspace/huge.csv (lines 1-1 of a 50000 byte file, line 1 from character "
        f"{start_char})"
    )
    assert len(rest.splitlines()[1]) == 7 + 30_000 - start_char
    assert rest.splitlines()[2] == (
        "[... line 1 is cut here; it goes on past the first 30000 bytes of the file, "
        "and read_file reads no further]"
    )
    assert beyond_error
    assert beyond == (
        "workspace/huge.csv: character 40000 of line 1 is not within the first 30000 "
        "bytes of this 50000 byte file, and read_file reads no further"
    )


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


def test_the_line_scan_gives_each_line_its_number_and_head_only() -> None:
    """No length in bytes any more: nothing used it."""
    scan = excerpt._LineScan(io.BytesIO(b"one\n" + b"x" * 10 + b"\nlast"), keep=4)
    scan.skip_to(2)

    assert list(scan.lines()) == [(2, b"xxxx"), (3, b"last")]
    assert scan.count_to_end() == 3
