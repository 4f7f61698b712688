"""search_files is a bounded grep: so many hits, no binary or huge file, and a pattern
that backtracks without end is stopped, not left to hold the cycle."""

from __future__ import annotations

import pytest

from hivemind.hive.layout import Hive
from hivemind.tools import files
from tests.test_tools import call, make_ctx


async def test_a_pattern_that_backtracks_without_end_is_stopped(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "SEARCH_SECONDS", 0.3)
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
    (hive.workspace_dir / "huge.md").write_text("needle\n" + "x" * files.MAX_SEARCH_FILE_BYTES)
    (hive.workspace_dir / "plain.md").write_text("a needle here\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "search_files", pattern="needle")

    assert not is_error
    assert content == "workspace/plain.md:1: a needle here"
