"""Moves that never replace a file: one rename(RENAME_NOREPLACE), or link + unlink."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivemind.fs import noreplace
from hivemind.fs.atomic import create_new
from hivemind.fs.noreplace import link_new, move_unique


@pytest.fixture(params=["renameat2", "link-unlink"])
def way(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test runs with the one-syscall rename and with the link + unlink fallback
    (the way a filesystem that refuses RENAME_NOREPLACE is handled)."""
    if request.param == "renameat2" and noreplace._renameat2 is None:
        pytest.fail("this Linux has no renameat2: the fast path would never be tested")
    refused = noreplace._noreplace_refused
    saved = set(refused)
    if request.param == "link-unlink":
        refused.add(os.lstat(tmp_path).st_dev)
    yield request.param
    refused.clear()
    refused.update(saved)


def test_a_move_to_a_free_name_moves_the_file(tmp_path: Path, way: str) -> None:
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_text("one")
    assert link_new(src, dst) is True
    assert not src.exists()
    assert dst.read_text() == "one"


def test_a_move_onto_a_taken_name_changes_nothing(tmp_path: Path, way: str) -> None:
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_text("new")
    dst.write_text("old")
    assert link_new(src, dst) is False
    assert src.read_text() == "new"
    assert dst.read_text() == "old"


def test_a_dangling_symlink_counts_as_taken(tmp_path: Path, way: str) -> None:
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_text("new")
    os.symlink(tmp_path / "nowhere", dst)
    assert link_new(src, dst) is False
    assert dst.is_symlink()


def test_a_missing_source_raises_file_not_found(tmp_path: Path, way: str) -> None:
    with pytest.raises(FileNotFoundError):
        link_new(tmp_path / "gone", tmp_path / "b")


def test_a_missing_target_folder_raises_file_not_found(tmp_path: Path, way: str) -> None:
    src = tmp_path / "a"
    src.write_text("x")
    with pytest.raises(FileNotFoundError):
        link_new(src, tmp_path / "no-such-folder" / "b")
    assert src.read_text() == "x"


def test_create_new_never_replaces_and_leaves_no_temp_file(tmp_path: Path, way: str) -> None:
    target = tmp_path / "note.md"
    assert create_new(target, "first") is True
    assert create_new(target, "second") is False
    assert target.read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.md"]


def test_move_unique_picks_the_next_free_name(tmp_path: Path, way: str) -> None:
    (tmp_path / "t.md").write_text("taken")
    src = tmp_path / "in" / "t.md"
    src.parent.mkdir()
    src.write_text("mine")
    moved = move_unique(src, tmp_path)
    assert moved.name == "t-1.md"
    assert moved.read_text() == "mine"
    assert (tmp_path / "t.md").read_text() == "taken"
