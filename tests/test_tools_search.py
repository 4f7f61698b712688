"""search_files is a bounded grep: so many hits, no binary or huge file, and a pattern
that backtracks without end is stopped, not left to hold the cycle."""

from __future__ import annotations

import pytest

from hivemind.hive.layout import Hive
from hivemind.tools import filesearch, searchpattern
from tests.test_tools import call, crowded_workspace, make_ctx


async def test_a_pattern_that_backtracks_without_end_is_stopped(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filesearch, "SEARCH_SECONDS", 0.3)
    (hive.workspace_dir / "a.md").write_text("a" * 60 + "!\n")
    ctx = make_ctx(hive)

    # With no stop, this match would run for longer than the universe has existed.
    content, is_error = await call(ctx, "search_files", pattern="(a|aa)+$")

    assert is_error
    assert content.startswith("search stopped after 0.3 s: the pattern is too slow")


async def test_hits_stop_at_max_results(hive: Hive) -> None:
    (hive.workspace_dir / "many.md").write_text("".join(f"hit {i}\n" for i in range(300)))
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="^hit", max_results=5)

    assert not is_error
    assert content.splitlines() == [f"workspace/many.md:{n}: hit {n - 1}" for n in range(1, 6)]


async def test_binary_and_huge_files_are_skipped(hive: Hive) -> None:
    (hive.workspace_dir / "bin.dat").write_bytes(b"needle\x00\x01\x02")
    (hive.workspace_dir / "huge.md").write_text("needle\n" + "x" * filesearch.MAX_SEARCH_FILE_BYTES)
    (hive.workspace_dir / "plain.md").write_text("a needle here\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle")

    assert not is_error
    assert content == "workspace/plain.md:1: a needle here"


@pytest.mark.parametrize(
    ("pattern", "count"),
    [("a{100000000}", "100000000"), ("a{1001}", "1001"), ("a{5,2000}", "2000"),
     ("a{2000,}", "2000"), ("(?x)a{1 0 0 0 0}", "10000")],
    ids=["exact", "just-over", "upper", "open-ended", "verbose-spaces"],
)
async def test_a_repeat_count_above_the_bound_is_refused_before_compiling(
    hive: Hive, pattern: str, count: str
) -> None:
    (hive.workspace_dir / "a.md").write_text("aaa\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern=pattern)

    assert is_error
    assert content.startswith(
        f"repeat count {count} at character "
    )
    assert f"is above {searchpattern.MAX_REPEAT}; use a smaller count" in content


@pytest.mark.parametrize(
    "pattern",
    ["(?:a{1000}){1000}", "(?:(?:a{100}){100}){100}", "(?:a{1000})(?#note){1000}",
     "(?x)(?:a{1000}) {1000}"],
    ids=["nested", "three-deep", "comment-between", "verbose-space-between"],
)
async def test_nested_repeats_that_multiply_out_are_refused(hive: Hive, pattern: str) -> None:
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern=pattern)

    assert is_error
    assert content.startswith("pattern too large: its counted repeats")


@pytest.mark.parametrize(
    "pattern",
    [r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
     r"(?:\d{1,3}\.){3}\d{1,3}", "x{1000}", r"\{5000}"],
    ids=["uuid", "ipv4", "at-the-bound", "escaped-brace"],
)
async def test_ordinary_counted_repeats_are_searched(hive: Hive, pattern: str) -> None:
    (hive.workspace_dir / "a.md").write_text("nothing here\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern=pattern)

    assert (content, is_error) == ("no match", False)


async def test_a_search_past_its_time_says_where_it_stopped(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(filesearch, "SEARCH_SECONDS", 0.0)
    (hive.workspace_dir / "a.md").write_text("needle\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle")

    assert not is_error
    assert content.splitlines() == [
        "no match",
        "[... search stopped after 0 s in workspace; 0 files searched, the rest not; "
        "ask for a narrower path]",
    ]


async def test_a_folder_too_big_to_read_stops_the_search_there(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    crowded_workspace(hive, monkeypatch, "a.md", "needle\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle")

    assert not is_error
    assert content.splitlines() == [
        "workspace/a.md:1: needle",
        "[... search stopped: the folder has more than 5 entries in workspace/crowd; "
        "1 files searched, the rest not; ask for a narrower path]",
    ]


async def test_lines_are_numbered_as_read_file_numbers_them(hive: Hive) -> None:
    (hive.workspace_dir / "a.md").write_text("one\x0ctwo\r\nneedle\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle$")

    assert (content, is_error) == ("workspace/a.md:2: needle", False)
