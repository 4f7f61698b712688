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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # layout checks its folders with `folder_link_out`
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
    of `st`: the runtime's own moves link a file twice for a moment (`atomic.link_new`
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


def is_folder_link(path: Path) -> bool:
    """True if `path` is a symlink (to a folder or anything else): not entered."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _leads_out(root: str, path: Path) -> str | None:
    """Where the link at `path` leads if that is outside the hive root `root` (real);
    None if `path` is no link or stays inside."""
    if not is_folder_link(path):
        return None
    target = os.path.realpath(path)
    if target == root or target.startswith(root.rstrip("/") + "/"):
        return None
    return target


def hive_folders(hive: Hive) -> Iterator[Path]:
    """The folders of the layout, and the folders of each agent's mail."""
    yield from (hive.agents_dir, hive.knowledge_dir, hive.mailboxes_dir, hive.tasks_dir,
                hive.workspace_dir, hive.state_dir, hive.active_dir, hive.done_dir,
                hive.failed_dir, hive.rejected_dir, hive.audit_dir)  # fmt: skip
    try:
        boxes = [e.name for e in os.scandir(hive.mailboxes_dir)]
    except OSError:
        return
    for name in sorted(boxes):
        box = hive.mailbox_dir(name)
        yield box
        yield from (box / "tmp", box / "new", box / "cur")


def folder_link_out(hive: Hive) -> str | None:
    """One line naming the first folder of the hive that is a link out of it, or the
    first link among the runtime's own files (the runtime would read and write
    there); None if there is none."""
    root = os.fspath(hive.root)
    for folder in hive_folders(hive):
        target = _leads_out(root, folder)
        if target is not None:
            return (f"{os.path.relpath(folder, root)}/: a link to {target}, outside the hive; "
                    "the runtime does not follow links out of a hive: make it a real folder")
    return _state_link(hive)


def _state_link(hive: Hive) -> str | None:
    """One line naming a link among the runtime's own files in .hivemind/ (a cloned
    hive may carry one: the lock file truncated, the audit appended to, through it)."""
    for folder in (hive.state_dir, hive.audit_dir, hive.state_dir / "roms"):
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            linked = stat.S_ISLNK(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1)
            if linked:
                where = os.path.relpath(entry.path, hive.root)
                return (f"{where}: a link; .hivemind/ holds the runtime's own files and no "
                        "link is followed there: remove it")
    return None
