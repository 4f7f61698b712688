"""Confinement: every path an agent's tool receives goes through `resolve_inside`;
links that lead out of a root are found, never followed."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from hivemind.errors import PathEscapeError


def resolve_inside(
    root: Path,
    path: str | Path,
    allowed: Iterable[Path] | None = None,
    *,
    forbid_hardlinks: bool = False,
) -> Path:
    """The real path of `path` (relative to `root`), refused unless inside `allowed`.

    `..` and symlinks are resolved (also for a file yet to be created: its existing
    parents must resolve inside). `allowed` defaults to `[root]`.
    """
    text = os.fspath(path)
    if "\0" in text:
        raise PathEscapeError(f"{text!r}: a path must not contain a NUL byte")
    if not text.strip():
        raise PathEscapeError("an empty path names no file")
    root_s = real_root(os.fspath(root))
    check_bounds(text, root_s)
    folders = [root_s] if allowed is None else [
        real for a in allowed
        # A folder that is a link out of the hive (workspace -> /elsewhere) allows nothing.
        if _within(real := realpath_under(root_s, os.path.join(root_s, os.fspath(a)))[0], root_s)
    ]
    candidate = os.path.expanduser(text) if text.startswith("~") else text
    if not os.path.isabs(candidate):
        candidate = os.path.join(root_s, candidate)
    # Every symlink of the existing prefix is followed and the rest normalised.
    real, st = realpath_under(root_s, candidate)
    if not any(_within(real, f) for f in folders):
        shown = ", ".join(_show(Path(root_s), Path(f)) for f in folders)
        why = "" if Path(real) == Path(candidate) else f" (it resolves to {real})"
        raise PathEscapeError(f"{text}: outside the allowed folders ({shown}){why}")
    if forbid_hardlinks:
        if st is None:
            try:
                st = os.lstat(real)
            except FileNotFoundError:
                return Path(real)
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            raise PathEscapeError(
                f"{text}: the file has {st.st_nlink} hard links; a hard link may reach "
                "a file outside the allowed folders, so it is refused"
            )
    return Path(real)


MAX_PATH_PARTS = 32
"""Folders and name a path a tool is given may have (a hive's files lie this deep at
most; walks leave out what is deeper: see `treewalk.MAX_DEPTH`)."""
MAX_PATH_BYTES = 1024


def check_bounds(text: str, root: str = "") -> None:
    """Refuse a path of more than MAX_PATH_BYTES bytes or MAX_PATH_PARTS parts (below
    `root`, if it lies there): a tree thousands of folders deep bricked every walk of
    the hive (PathEscapeError)."""
    size = len(os.fsencode(text))
    if size > MAX_PATH_BYTES:
        raise PathEscapeError(f"{text[:60]}...: a path of {size:,} bytes; the limit is "
                              f"{MAX_PATH_BYTES:,}")
    prefix = root.rstrip("/") + "/"
    below = text[len(prefix):] if root and text.startswith(prefix) else text
    parts = sum(1 for part in below.split("/") if part and part != ".")
    if parts > MAX_PATH_PARTS:
        raise PathEscapeError(f"{text[:60]}...: a path of {parts} folders and names; the "
                              f"limit is {MAX_PATH_PARTS}")


@lru_cache(maxsize=256)
def _real_absolute_root(root: str) -> str:
    return os.path.realpath(root)


def real_root(root: str) -> str:
    """The real path of a hive root; an absolute one is resolved once per process
    (a hive does not move under a running daemon), a relative one every time."""
    return _real_absolute_root(root) if os.path.isabs(root) else os.path.realpath(root)


def realpath_under(real_root: str, path: str) -> tuple[str, os.stat_result | None]:
    """`os.path.realpath(path)` for an absolute `path`, and the lstat of its last part
    when it was taken (see `walk_below`; None otherwise)."""
    walked = walk_below(real_root, path)
    return walked if walked is not None else (os.path.realpath(path), None)


def walk_below(real_root: str, path: str) -> tuple[str, os.stat_result | None] | None:
    """The real path of `path` when it lies under `real_root` (itself real) and no
    part below the root is a symlink, `.`, `..` or empty; else None.

    One lstat per part below the root, none above it: what `os.path.realpath` would
    find there, for less. Also the lstat of the last part (None if it is missing).
    """
    prefix = real_root.rstrip("/") + "/"
    if not path.startswith(prefix) or path == prefix:
        return None
    current = prefix[:-1]
    st: os.stat_result | None = None
    missing = False
    for part in path[len(prefix):].split("/"):
        if part in ("", ".", ".."):
            return None
        current = f"{current}/{part}"
        if missing:
            continue
        try:
            st = os.lstat(current)
        except OSError:
            # Nothing below a part that cannot be stat'ed can be a symlink either.
            missing, st = True, None
            continue
        if stat.S_ISLNK(st.st_mode):
            return None
    return current, st


def _within(real: str, folder: str) -> bool:
    return real == folder or real.startswith(folder.rstrip("/") + "/")


def _show(root: Path, folder: Path) -> str:
    if folder == root:
        return f"{root}/"
    try:
        return folder.relative_to(root).as_posix() + "/"
    except ValueError:
        return f"{folder}/"


def is_folder_link(path: Path) -> bool:
    """True if `path` is a symlink (to a folder or anything else): not entered."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def leads_out(root: str, path: Path) -> str | None:
    """Where the link at `path` leads if that is outside the real root `root`; None if
    `path` is no link or stays inside."""
    if not is_folder_link(path):
        return None
    target = os.path.realpath(path)
    if _within(target, root):
        return None
    return target


def first_link(folders: Iterable[Path]) -> str | None:
    """The path of the first entry (by name, folder by folder) that is a link: a symlink,
    or a regular file with another name (a hard link); None if there is none."""
    for folder in folders:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1):
                return entry.path
    return None
