"""Confinement: a path is refused unless it resolves inside the allowed folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hivemind.errors import PathEscapeError
from hivemind.fs.globs import glob_match, glob_root
from hivemind.fs.paths import resolve_inside
from hivemind.hive.layout import Hive


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("secret")
    return folder


def test_relative_path_resolves_under_the_root(hive: Hive) -> None:
    got = resolve_inside(hive.root, "workspace/notes/a.md", [hive.workspace_dir])
    assert got == hive.workspace_dir / "notes" / "a.md"


def test_absolute_path_inside_is_accepted(hive: Hive) -> None:
    target = hive.knowledge_dir / "x.md"
    assert resolve_inside(hive.root, target, hive.writable_dirs) == target


def test_dotdot_that_stays_inside_is_normalised(hive: Hive) -> None:
    got = resolve_inside(hive.root, "workspace/a/../b.md", [hive.workspace_dir])
    assert got == hive.workspace_dir / "b.md"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("../outside/secret.txt", id="dotdot-out-of-root"),
        pytest.param("workspace/../../outside/secret.txt", id="dotdot-through-allowed"),
        pytest.param("workspace/new/../../../x", id="dotdot-through-missing-folder"),
        pytest.param("/etc/passwd", id="absolute-outside"),
        pytest.param("agents/bob/ROM.md", id="sibling-folder-not-allowed"),
        pytest.param("~/.ssh/id_rsa", id="home"),
        pytest.param("workspace2/x", id="prefix-is-not-inside"),
    ],
)
def test_escapes_are_refused(hive: Hive, path: str) -> None:
    (hive.root / "workspace2").mkdir()
    with pytest.raises(PathEscapeError) as caught:
        resolve_inside(hive.root, path, [hive.workspace_dir, hive.knowledge_dir])
    message = str(caught.value)
    assert path in message
    assert "workspace/, knowledge/" in message


def test_symlink_pointing_out_is_refused(hive: Hive, outside: Path) -> None:
    (hive.workspace_dir / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PathEscapeError, match="resolves to"):
        resolve_inside(hive.root, "workspace/link.txt", [hive.workspace_dir])


def test_dangling_symlink_pointing_out_is_refused(hive: Hive, outside: Path) -> None:
    (hive.workspace_dir / "new.txt").symlink_to(outside / "not-yet.txt")
    with pytest.raises(PathEscapeError):
        resolve_inside(hive.root, "workspace/new.txt", [hive.workspace_dir])


def test_file_under_a_symlinked_parent_is_refused(hive: Hive, outside: Path) -> None:
    (hive.workspace_dir / "sub").symlink_to(outside, target_is_directory=True)
    for path in ("workspace/sub/secret.txt", "workspace/sub/to-create.txt"):
        with pytest.raises(PathEscapeError):
            resolve_inside(hive.root, path, [hive.workspace_dir])


def test_symlink_that_stays_inside_is_allowed(hive: Hive) -> None:
    (hive.workspace_dir / "real.md").write_text("x")
    (hive.workspace_dir / "alias.md").symlink_to(hive.workspace_dir / "real.md")
    got = resolve_inside(hive.root, "workspace/alias.md", [hive.workspace_dir])
    assert got == hive.workspace_dir / "real.md"


def test_hard_link_is_refused_when_asked(hive: Hive, outside: Path) -> None:
    linked = hive.workspace_dir / "linked.txt"
    os.link(outside / "secret.txt", linked)
    assert resolve_inside(hive.root, linked, [hive.workspace_dir]) == linked
    with pytest.raises(PathEscapeError, match="2 hard links"):
        resolve_inside(hive.root, linked, [hive.workspace_dir], forbid_hardlinks=True)


def test_default_allowed_is_the_root(hive: Hive) -> None:
    assert resolve_inside(hive.root, "tasks/x.md") == hive.tasks_dir / "x.md"
    with pytest.raises(PathEscapeError):
        resolve_inside(hive.root, "..")


@pytest.mark.parametrize("bad", ["", "a\0b"], ids=["empty", "nul-byte"])
def test_empty_and_nul_paths_are_refused(hive: Hive, bad: str) -> None:
    with pytest.raises(PathEscapeError):
        resolve_inside(hive.root, bad)


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.md", "style.md", True),
        ("*.md", "python/style.md", False),
        ("**/*.md", "style.md", True),
        ("**/*.md", "a/b/style.md", True),
        ("python/**", "python/a/b.py", True),
        ("workspace/src/*.py", "workspace/src/app.py", True),
        ("workspace/src/*.py", "workspace/src/sub/app.py", False),
        ("notes-?.md", "notes-1.md", True),
        ("[ab]*.md", "beta.md", True),
        ("[!ab]*.md", "beta.md", False),
    ],
)
def test_glob_matching(pattern: str, path: str, matches: bool) -> None:
    assert glob_match(pattern, path) is matches


def test_glob_root_is_the_folder_before_the_first_wildcard() -> None:
    assert glob_root("workspace/src/**/*.py") == "workspace/src"
    assert glob_root("*.md") == ""
    assert glob_root("a/b/c.txt") == "a/b"
