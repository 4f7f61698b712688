"""A task folder's files, listed without moving any: names, stats, or read tasks.

The board rejects an unreadable file; a listing only says what keeps it from
being read (`hivemind task list`, `hivemind inspect` show it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.fs.filenames import is_utf8, not_utf8_reason
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import is_temp_name
from hivemind.hive.models import Task


def md_entries(folder: Path) -> list[os.DirEntry[str]]:
    """Non-temp `*.md` entries of a folder that are not folders (no stat call needed)."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [
        e for e in entries
        if e.name.endswith(".md") and not is_temp_name(e.name)
        and not e.is_dir(follow_symlinks=False)
    ]


def md_count(folder: Path) -> int:
    """How many non-temp `*.md` names a folder holds: names only, for counts a status
    shows (a folder named `x.md` is counted; no file kind is looked up)."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    return sum(1 for name in names if name.endswith(".md") and not is_temp_name(name))


def md_files(
    folder: Path, paths: dict[str, Path] | None = None
) -> Iterator[tuple[Path, os.stat_result]]:
    """Non-temp `*.md` entries of a folder with their lstat (symlinks not followed).

    `paths`: Path objects kept by file name across calls, for a caller that lists the
    same folder every cycle (parsing the string and hashing the parts again cost more
    than the stat)."""
    for entry in md_entries(folder):
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            continue
        if paths is None:
            yield Path(entry.path), st
            continue
        path = paths.get(entry.path)
        if path is None:
            if len(paths) > 4096:
                paths.clear()
            path = paths[entry.path] = Path(entry.path)
        yield path, st


def read_each(folder: Path) -> Iterator[tuple[Path, os.stat_result, Task | str]]:
    """Each task file of `folder` with its lstat, and its task or the problem that keeps
    it from being read (a link is not followed). Moves nothing, unlike the board."""
    for path, st in md_files(folder):
        if not stat.S_ISREG(st.st_mode):
            yield path, st, "not a regular file (a link is not read)"
            continue
        if st.st_nlink > 1:  # may be a file from outside the hive (see links.py)
            yield path, st, f"the file has {st.st_nlink} hard links (not read)"
            continue
        if not is_utf8(path.name):  # its id (the stem) could be shown nowhere
            yield path, st, not_utf8_reason(path.name)
            continue
        try:
            yield path, st, read_task(path)
        except FileFormatError as exc:
            yield path, st, exc.reason
        except OSError as exc:
            yield path, st, str(exc.strerror)
