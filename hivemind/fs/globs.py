"""Relative glob matching (`knowledge/**/*.md`), shared by ROM `knowledge` and `watch`
lists: `**` spans folders, `*` does not."""

from __future__ import annotations

import re
from functools import lru_cache


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
