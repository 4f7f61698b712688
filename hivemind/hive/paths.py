"""Confinement: every path an agent's tool receives goes through `resolve_inside`.

Also hive-relative glob matching (`knowledge/**/*.md`) shared by ROM `knowledge`
and `watch` lists.
"""

from __future__ import annotations

import os
import re
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
    root = Path(root).resolve()
    text = os.fspath(path)
    if "\0" in text:
        raise PathEscapeError(f"{text!r}: a path must not contain a NUL byte")
    if not text.strip():
        raise PathEscapeError("an empty path names no file")
    folders = [root] if allowed is None else [_absolute(root, a) for a in allowed]
    candidate = Path(text).expanduser() if text.startswith("~") else Path(text)
    if not candidate.is_absolute():
        candidate = root / candidate
    # realpath follows every symlink of the existing prefix and normalises the rest.
    real = Path(os.path.realpath(candidate))
    if not any(real == f or real.is_relative_to(f) for f in folders):
        shown = ", ".join(_show(root, f) for f in folders)
        why = "" if real == candidate else f" (it resolves to {real})"
        raise PathEscapeError(f"{text}: outside the allowed folders ({shown}){why}")
    if forbid_hardlinks:
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            return real
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            raise PathEscapeError(
                f"{text}: the file has {st.st_nlink} hard links; a hard link may reach "
                "a file outside the allowed folders, so it is refused"
            )
    return real


def _absolute(root: Path, folder: Path) -> Path:
    folder = Path(folder)
    return Path(os.path.realpath(folder if folder.is_absolute() else root / folder))


def _show(root: Path, folder: Path) -> str:
    if folder == root:
        return f"{root}/"
    try:
        return folder.relative_to(root).as_posix() + "/"
    except ValueError:
        return f"{folder}/"


# -- globs ---------------------------------------------------------------------


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled regex for a POSIX glob where `**` spans folders and `*` does not."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(pattern: str, relpath: str) -> bool:
    """True if the POSIX relative path matches the glob (`a/**/*.md`, `*.py`)."""
    return glob_regex(pattern.strip().lstrip("/")).match(relpath) is not None


def glob_root(pattern: str) -> str:
    """The folder part of a glob before its first wildcard (`workspace/src` for
    `workspace/src/**/*.py`): only that folder needs walking."""
    parts = []
    for part in pattern.strip().lstrip("/").split("/")[:-1]:
        if any(ch in part for ch in "*?["):
            break
        parts.append(part)
    return "/".join(parts)
