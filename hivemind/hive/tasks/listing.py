"""The board's folders listed without moving a file: names, stats, or read tasks.

The board rejects an unreadable file; a listing only says what keeps it from
being read (`hivemind task list`, `hivemind inspect` show it). Names only where
that is enough: a stat per file would make a scan cost O(finished tasks).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.fs.filenames import is_utf8, not_utf8_reason
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.models import Task, TaskState


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


def active_agents(hive: Hive) -> list[str]:
    """Names of the folders in tasks/active/."""
    try:
        return sorted(
            e.name
            for e in os.scandir(hive.active_dir)
            if e.is_dir(follow_symlinks=False) and not is_temp_name(e.name)
        )
    except FileNotFoundError:
        return []


def done_ids(hive: Hive) -> set[str]:
    """Ids of the tasks in done/."""
    return {entry.name[:-3] for entry in md_entries(hive.done_dir)}


def canonical(hive: Hive, task_id: str) -> Iterator[tuple[Path, TaskState, str | None]]:
    """Where the board itself would have put this id (`<id>.md` in each folder)."""
    name = f"{task_id}.md"
    yield hive.tasks_dir / name, TaskState.PENDING, None
    for agent in active_agents(hive):
        yield hive.active_dir_for(agent) / name, TaskState.ACTIVE, agent
    yield hive.done_dir / name, TaskState.DONE, None
    yield hive.failed_dir / name, TaskState.FAILED, None


def placed(hive: Hive, ids: set[str]) -> dict[str, Path]:
    """Where each of `ids` already is outside the drop zone (as `<id>.md`): a few
    lookups for a few ids, one listing of the board for many."""
    agents = active_agents(hive)
    if len(ids) * (len(agents) + 2) <= 256:
        found: dict[str, Path] = {}
        for task_id in ids:
            for path, state, _ in canonical(hive, task_id):
                if state is not TaskState.PENDING and os.path.lexists(path):
                    found[task_id] = path
                    break
        return found
    return {
        name[:-3]: Path(folder, name)
        for folder, name in _placed_names(hive, agents)
        if name[:-3] in ids
    }


def _placed_names(hive: Hive, agents: Sequence[str]) -> Iterator[tuple[str, str]]:
    """(folder, file name) of every task file outside the drop zone."""
    folders = [hive.active_dir_for(a) for a in agents]
    folders += [hive.done_dir, hive.failed_dir]
    for folder in folders:
        for entry in md_entries(folder):
            yield str(folder), entry.name
