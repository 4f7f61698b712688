"""The cheap real path under a hive root: the same answer as `os.path.realpath`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hivemind.errors import PathEscapeError
from hivemind.fs.paths import realpath_under, resolve_inside, walk_below
from hivemind.hive.layout import Hive


@pytest.fixture
def tree(hive: Hive, tmp_path: Path) -> Hive:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (hive.workspace_dir / "notes").mkdir()
    (hive.workspace_dir / "notes" / "a.md").write_text("a")
    (hive.workspace_dir / "file.md").write_text("f")
    (hive.workspace_dir / "out").symlink_to(outside, target_is_directory=True)
    (hive.workspace_dir / "alias.md").symlink_to(hive.workspace_dir / "notes" / "a.md")
    (hive.workspace_dir / "loop").symlink_to(hive.workspace_dir / "loop")
    return hive


@pytest.mark.parametrize(
    "rel",
    [
        pytest.param("workspace/notes/a.md", id="plain-file"),
        pytest.param("workspace/notes/new/deeper.md", id="missing-parts"),
        pytest.param("workspace/file.md/below", id="below-a-file"),
        pytest.param("workspace/out/secret.txt", id="symlinked-folder-out"),
        pytest.param("workspace/alias.md", id="symlink-inside"),
        pytest.param("workspace/loop/x", id="symlink-loop"),
        pytest.param("workspace/notes/../file.md", id="dotdot"),
        pytest.param("workspace/./notes//a.md", id="dot-and-empty-parts"),
        pytest.param("workspace/", id="trailing-slash"),
    ],
)
def test_realpath_under_the_root_equals_os_realpath(tree: Hive, rel: str) -> None:
    full = os.path.join(tree.root, rel)
    assert realpath_under(str(tree.root), full)[0] == os.path.realpath(full)


@pytest.mark.parametrize(
    "rel",
    ["workspace/out/secret.txt", "workspace/alias.md", "workspace/a/../b", "workspace//b"],
    ids=["symlink-out", "symlink-in", "dotdot", "empty-part"],
)
def test_the_walk_gives_up_on_symlinks_and_dots(tree: Hive, rel: str) -> None:
    assert walk_below(str(tree.root), os.path.join(tree.root, rel)) is None


def test_the_walk_returns_the_stat_of_the_last_part(tree: Hive) -> None:
    walked = walk_below(str(tree.root), str(tree.workspace_dir / "file.md"))
    assert walked is not None
    assert walked[1] is not None and walked[1].st_size == 1
    missing = walk_below(str(tree.root), str(tree.workspace_dir / "nope" / "x.md"))
    assert missing == (str(tree.workspace_dir / "nope" / "x.md"), None)


def test_a_hard_link_found_by_the_walk_is_still_refused(tree: Hive, tmp_path: Path) -> None:
    os.link(tmp_path / "outside" / "secret.txt", tree.workspace_dir / "hard.txt")
    with pytest.raises(PathEscapeError, match="2 hard links"):
        resolve_inside(tree.root, "workspace/hard.txt", [tree.workspace_dir],
                       forbid_hardlinks=True)


def test_an_allowed_folder_replaced_by_a_link_out_of_the_hive_allows_nothing(
    tree: Hive, tmp_path: Path
) -> None:
    # The allowed folders are resolved on every call, as the target is: no stale cache;
    # one that leads out of the hive (a cloned `knowledge -> /elsewhere`) allows nothing.
    assert resolve_inside(tree.root, "knowledge/x.md", [tree.knowledge_dir])
    tree.knowledge_dir.rmdir()
    tree.knowledge_dir.symlink_to(tmp_path / "outside", target_is_directory=True)
    for allowed in ([tree.knowledge_dir], [tree.workspace_dir]):
        with pytest.raises(PathEscapeError, match="resolves to"):
            resolve_inside(tree.root, "knowledge/secret.txt", allowed)


def test_a_relative_root_follows_the_working_directory(
    tree: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree.root)
    assert resolve_inside(Path("."), "workspace/notes/a.md") == tree.workspace_dir / "notes/a.md"
    monkeypatch.chdir(tree.workspace_dir)
    assert resolve_inside(Path("."), "notes/a.md") == tree.workspace_dir / "notes/a.md"


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        pytest.param("workspace/notes/a.md", "workspace/notes/a.md", id="plain"),
        pytest.param("workspace/new/x.md", "workspace/new/x.md", id="missing"),
        pytest.param("workspace/alias.md", "workspace/notes/a.md", id="symlink-inside"),
        pytest.param("workspace/notes/../file.md", "workspace/file.md", id="dotdot"),
    ],
)
def test_hive_relative_resolves_like_path_resolve(tree: Hive, rel: str, expected: str) -> None:
    assert tree.relative(tree.root / rel) == expected
    assert tree.relative(tree.root / rel) == (tree.root / rel).resolve().relative_to(
        tree.root
    ).as_posix()


def test_hive_relative_of_a_path_leading_out_is_absolute(tree: Hive, tmp_path: Path) -> None:
    out = tree.workspace_dir / "out" / "secret.txt"
    assert tree.relative(out) == out.as_posix()
    assert tree.relative(tmp_path / "outside") == (tmp_path / "outside").as_posix()
