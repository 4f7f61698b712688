"""Links in a hive the runtime reads on its own: never followed out of it (DESIGN §3).

A hive is someone else's folder: a symlink committed as `tasks/active/a/notes.md`
or a hard link dropped into tasks/ would carry a user's file into a prompt. The
checks here use the lstat a caller already has; only a file with more than one
hard link costs a look at the board's folders.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from hivemind.hive.layout import Hive

LINK_REASON = "a symbolic link is not read as a task; copy the file instead"
FOLDER_LINK_REASON = "a link to a folder is not read as a task folder; make it a real folder"


def task_file_problem(hive: Hive, st: os.stat_result) -> str | None:
    """Why the task file of lstat `st` is not read (None: it may be): a symlink, not
    a regular file, or a hard link to a file outside the task board."""
    if stat.S_ISLNK(st.st_mode):
        return LINK_REASON
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_nlink > 1 and board_links(hive, st) < st.st_nlink:
        return (f"the file has {st.st_nlink} hard links and not all are on the task board; "
                "a hard link may be a file from outside the hive, so it is not read: "
                "copy the file instead")
    return None


def board_links(hive: Hive, st: os.stat_result) -> int:
    """How many names on the task board (its folders, temp names included) are the file
    of `st`: the runtime's own moves link a file twice for a moment (`noreplace.link_new`
    where no rename refuses to replace), and a crash may leave both names."""
    found = 0
    for folder in _board_folders(hive):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.inode() != st.st_ino:
                continue
            try:
                if entry.stat(follow_symlinks=False).st_dev == st.st_dev:
                    found += 1
            except OSError:
                continue
    return found


def _board_folders(hive: Hive) -> Iterator[Path]:
    yield from (hive.tasks_dir, hive.done_dir, hive.failed_dir, hive.rejected_dir)
    try:
        agents = [e.name for e in os.scandir(hive.active_dir) if e.is_dir(follow_symlinks=False)]
    except OSError:
        agents = []
    for name in agents:
        yield hive.active_dir_for(name)
