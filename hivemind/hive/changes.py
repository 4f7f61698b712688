"""What the watcher reports on: which paths mean which event, and a stat snapshot."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path

from hivemind.fs.globs import glob_match, glob_root
from hivemind.fs.statcache import Sig, lstat_sig, sig_of
from hivemind.fs.treewalk import walk
from hivemind.hive.layout import HUMAN, Hive, is_temp_name


class HiveEventKind(StrEnum):
    TASK_DROPPED = "task_dropped"
    TASK_EDITED = "task_edited"  # a claimed task (tasks/active/<agent>/) changed
    MAIL_ARRIVED = "mail_arrived"
    ROM_CHANGED = "rom_changed"
    AGENT_ADDED = "agent_added"
    AGENT_REMOVED = "agent_removed"
    KNOWLEDGE_CHANGED = "knowledge_changed"
    FILE_CHANGED = "file_changed"


def classify(rel: str, watch_globs: Iterable[str] = ()) -> list[tuple[HiveEventKind, str | None]]:
    """The event kinds a change of the hive-relative POSIX path `rel` stands for."""
    parts = rel.split("/")
    if any(is_temp_name(p) for p in parts):
        return []  # editor temp names, .hivemind/, .git/, maildir temp files
    out: list[tuple[HiveEventKind, str | None]] = []
    top, depth = parts[0], len(parts)
    if top == "tasks" and depth == 2 and rel.endswith(".md"):
        out.append((HiveEventKind.TASK_DROPPED, None))
    elif top == "tasks" and depth == 4 and parts[1] == "active" and rel.endswith(".md"):
        out.append((HiveEventKind.TASK_EDITED, parts[2]))
    elif top == "mailboxes" and depth == 4 and parts[2] == "new" and parts[1] != HUMAN:
        # People read their mail with the CLI; no agent wakes for it.
        out.append((HiveEventKind.MAIL_ARRIVED, parts[1]))
    elif top == "agents" and depth == 3 and parts[2] == "ROM.md":
        out.append((HiveEventKind.ROM_CHANGED, parts[1]))
    elif top == "knowledge" and depth >= 2:
        out.append((HiveEventKind.KNOWLEDGE_CHANGED, None))
    if any(glob_match(g, rel) for g in watch_globs):
        out.append((HiveEventKind.FILE_CHANGED, None))
    return out


def snapshot(
    hive: Hive, watch_globs: Iterable[str] = (), ignored: dict[str, str] | None = None
) -> dict[Path, Sig]:
    """(path -> inode, size, mtime) of every file the watcher reports on. `ignored`, if
    given, gets what in tasks/ is not read as a task, and why (see `not_a_task`)."""
    out: dict[Path, Sig] = {}

    def add(path: Path) -> None:
        sig = lstat_sig(path)
        if sig is not None:
            out[path] = sig

    def add_entry(entry: os.DirEntry[str]) -> None:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode):
            out[Path(entry.path)] = sig_of(st)

    for entry in _scan(hive.tasks_dir):
        if entry.name.endswith(".md"):
            add_entry(entry)
        if ignored is not None and (why := not_a_task(entry.name, _is_dir(entry))):
            ignored[entry.name] = why
    for held in _scan(hive.active_dir):
        for entry in _scan(Path(held.path)):
            if entry.name.endswith(".md"):
                add_entry(entry)
    for box in _scan(hive.mailboxes_dir):
        if box.name == HUMAN:
            continue
        for entry in _scan(Path(box.path) / "new"):
            add_entry(entry)
    for agent in _scan(hive.agents_dir):
        rom = Path(agent.path) / "ROM.md"
        if os.path.lexists(rom):
            add(rom)
    for path in _walk(hive.knowledge_dir):
        add(path)
    for pattern in watch_globs:
        base = hive.root / glob_root(pattern)
        for path in _walk(base):
            if glob_match(pattern, path.relative_to(hive.root).as_posix()):
                add(path)
    return out


# Folders of tasks/ that are the board's own.
_BOARD_FOLDERS = frozenset({"active", "done", "failed", "rejected"})
# Names a person may give a Markdown (or plain text) task by mistake: renaming says what to.
_TEXT_SUFFIXES = frozenset({"", ".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".txt", ".text"})


def not_a_task(name: str, is_dir: bool = False) -> str | None:
    """Why the entry `name` of tasks/ is not read as a task, in one line a person can act
    on; None for a task file, the board's own folders and editor temp names."""
    if is_temp_name(name) or (is_dir and name in _BOARD_FOLDERS):
        return None
    shown = os.fsencode(name).decode("utf-8", "backslashreplace")
    if is_dir:
        return (f"tasks/{shown}/: a folder is not read: tasks are the *.md files directly "
                f"in tasks/; move them from {shown}/ into tasks/")
    if name.endswith(".md"):
        return None
    stem, suffix = os.path.splitext(shown)
    if suffix.lower() in _TEXT_SUFFIXES:
        return (f"tasks/{shown}: not read as a task: only *.md files are; "
                f"rename it to {stem}.md")
    return f"tasks/{shown}: not read as a task: only *.md files are"


def tasks_not_read(hive: Hive) -> list[str]:
    """What in tasks/ is not read as a task, each in its one line (see `not_a_task`)."""
    return sorted(
        why for entry in _scan(hive.tasks_dir) if (why := not_a_task(entry.name, _is_dir(entry)))
    )


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _scan(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return [e for e in os.scandir(folder) if not is_temp_name(e.name)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _walk(folder: Path) -> Iterable[Path]:
    for root, dirs, files in walk(os.fspath(folder)):
        dirs[:] = [d for d in dirs if not is_temp_name(d)]
        for name in files:
            if not is_temp_name(name):
                yield Path(root) / name
