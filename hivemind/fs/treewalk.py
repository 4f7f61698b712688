"""Walking a folder tree of a hive: iterative, bounded in depth, links not entered.

A hive is someone else's folder: a tree 2,000 folders deep made `os.walk` (which
recurses) raise RecursionError and crash the daemon at its start. `walk` keeps its
own stack, and leaves out what lies deeper than `MAX_DEPTH`, said once per folder.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

logger = logging.getLogger(__name__)

MAX_DEPTH = 32
"""Folders below the top of a walk that are entered; deeper ones are left out (and
every tool refuses a path of more parts: see `paths.MAX_PATH_PARTS`)."""

_told: set[str] = set()  # folders whose depth was said once (bounded: see `_say_deep`)


def walk(top: str, max_depth: int = MAX_DEPTH) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(top)` top-down, without recursion: (folder, sub-folders, other names);
    the caller may prune sub-folders in place. Links to folders are listed with the
    other names and not entered; a folder `max_depth` levels down is not listed."""
    stack = [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue  # unreadable, gone, or a path too long for the system
        dirs: list[str] = []
        files: list[str] = []
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry.name)
        yield folder, dirs, files
        if dirs and depth + 1 >= max_depth:
            _say_deep(top, folder, max_depth)
            continue
        for name in reversed(dirs):  # popped in the order given, as os.walk goes
            stack.append((os.path.join(folder, name), depth + 1))


def _say_deep(top: str, folder: str, max_depth: int) -> None:
    """Warn, once per walked top, that folders below `folder` were left out."""
    if top in _told:
        return
    if len(_told) > 1024:
        _told.clear()
    _told.add(top)
    logger.warning("%s: folders more than %d levels deep are not read (the first left "
                   "out is in %s)", top, max_depth, os.path.relpath(folder, top)[:200])
