"""list_files shows what is in a folder as it is: a link as a link (never followed,
dangling or not), no host path, and a walk that stops, saying where."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hivemind.hive.layout import Hive
from hivemind.tools import files
from tests.test_tools import call, crowded_workspace, make_ctx


async def test_a_dangling_link_is_listed_with_the_rest(hive: Hive, tmp_path: Path) -> None:
    (hive.workspace_dir / "good.txt").write_text("hello\n")
    os.symlink(tmp_path / "nonexistent", hive.workspace_dir / "dangling.txt")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "list_files", path="workspace")

    assert not is_error
    assert content.splitlines() == [
        "workspace/dangling.txt  (symbolic link, not followed)",
        "workspace/good.txt  (6 bytes)",
    ]
    assert str(tmp_path) not in content


async def test_a_link_to_a_file_outside_the_hive_shows_nothing_of_it(
    hive: Hive, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("x" * 12345)
    os.symlink(secret, hive.workspace_dir / "link.txt")
    os.symlink(tmp_path, hive.workspace_dir / "outdir")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "list_files", path="workspace")

    assert not is_error
    assert content.splitlines() == [
        "workspace/link.txt  (symbolic link, not followed)",
        "workspace/outdir  (symbolic link, not followed)",
    ]


async def test_a_special_file_is_listed_without_being_opened(hive: Hive) -> None:
    os.mkfifo(hive.workspace_dir / "pipe")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "list_files", path="workspace")

    assert (content, is_error) == ("workspace/pipe  (not a regular file)", False)


async def test_a_folder_too_big_to_read_stops_the_listing_there(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    crowded_workspace(hive, monkeypatch, "a.txt", "a")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "list_files", path="workspace")

    assert not is_error
    assert content.splitlines() == [
        "workspace/a.txt  (1 bytes)",
        "[... listing stopped: the folder has more than 5 entries in workspace/crowd; "
        "ask for a narrower path]",
    ]


async def test_a_listing_past_its_time_says_where_it_stopped(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "LIST_SECONDS", 0.0)
    (hive.workspace_dir / "a.txt").write_text("a")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "list_files", path="workspace")

    assert not is_error
    assert content == "[... listing stopped after 0 s in workspace; ask for a narrower path]"
