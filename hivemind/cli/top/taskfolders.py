"""The task folders as `top` shows them: how many tasks in each state, and the newest.

A folder is listed again only when its mtime changed (the board moves whole files in
and out by renames), and only the newest files of each state are read.
"""

from __future__ import annotations

import heapq
import os
import stat
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from hivemind.errors import UserError
from hivemind.fs.filenames import shown
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive
from hivemind.hive.quarantine import read_reason

STATES = ("pending", "active", "failed", "done", "rejected")
"""The task folders, in the order `top` shows them."""

NEWEST = {"pending": 5, "active": 20, "failed": 10, "done": 5, "rejected": 5}
"""How many of the newest tasks of each state are shown (the rest are counted)."""


@dataclass(frozen=True)
class TaskLine:
    state: str
    id: str
    title: str
    agent: str
    changed_at: datetime
    problem: str = ""
    waits: str = ""  # why a pending task is not taken (the daemon's waiting list)
    path: str = ""  # its file (two files may hold one id: `t1.md`, `t1-1.md`)



def _folders(hive: Hive, state: str) -> list[tuple[str, str]]:
    if state == "active":
        try:
            return [(e.path, e.name) for e in os.scandir(hive.active_dir)
                    if e.is_dir(follow_symlinks=False)]
        except OSError:
            return []
    folder = {"pending": hive.tasks_dir, "failed": hive.failed_dir, "done": hive.done_dir,
              "rejected": hive.rejected_dir}[state]
    return [(os.fspath(folder), "")]


RACY = 2.0
"""Seconds within which a folder's mtime may hide a later change (a coarse clock):
such a folder is listed again, whatever its mtime says."""


@dataclass
class _Listing:
    """One task folder as last listed: its mtime, how many tasks, the newest."""

    mtime_ns: int
    count: int
    newest: list[tuple[float, str]]


class FolderCache:
    """Task folders listed again only when their mtime changed (a task came or went:
    the board moves whole files in and out, by renames)."""

    def __init__(self) -> None:
        self._seen: dict[str, _Listing] = {}

    def listing(self, folder: str, keep: int) -> _Listing | None:
        try:
            st = os.stat(folder)
        except OSError:
            self._seen.pop(folder, None)
            return None
        known = self._seen.get(folder)
        fresh = time.time() - st.st_mtime > RACY
        if known is not None and known.mtime_ns == st.st_mtime_ns and fresh \
                and len(known.newest) >= min(keep, known.count):
            return known
        try:
            scan = list(os.scandir(folder))
        except OSError:
            return None
        entries: list[tuple[float, str]] = []
        for e in scan:
            if not e.name.endswith(".md") or e.name.startswith("."):
                continue
            try:
                est = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(est.st_mode):
                entries.append((est.st_mtime, e.path))
        listing = _Listing(st.st_mtime_ns, len(entries), heapq.nlargest(keep, entries))
        self._seen[folder] = listing
        return listing


def task_lines(hive: Hive, cache: FolderCache) -> tuple[dict[str, int], list[TaskLine]]:
    """How many tasks each state has, and its newest (only those files are read)."""
    counts: dict[str, int] = {}
    lines: list[TaskLine] = []
    for state in STATES:
        entries: list[tuple[float, str, str]] = []
        count = 0
        for folder, holder in _folders(hive, state):
            listing = cache.listing(folder, NEWEST[state])
            if listing is not None:
                count += listing.count
                entries.extend((mtime, path, holder) for mtime, path in listing.newest)
        counts[state] = count
        for mtime, path, holder in heapq.nlargest(NEWEST[state], entries):
            lines.append(replace(_line(state, Path(path), holder, mtime), path=path))
    return counts, lines


def _line(state: str, path: Path, holder: str, mtime: float) -> TaskLine:
    when = datetime.fromtimestamp(mtime, UTC)
    name = shown(path.name[:-3])
    if state == "rejected":
        reason = " ".join(read_reason(path).split())
        return TaskLine(state, name, "", "", when, reason or "no reason kept")
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # read as the board would
            return TaskLine(state, name, "", holder, when, "a link (not read)")
        task = read_task(path)
    except (OSError, UserError) as exc:
        return TaskLine(state, name, "", holder, when, str(exc).rsplit(": ", 1)[-1])
    agent = holder or (task.agent or "" if state in ("done", "failed") else "")
    if state == "failed":
        problem = _last_failure(task.body)
        return TaskLine(state, task.id, task.title, agent, when, problem)
    return TaskLine(state, task.id, task.title, agent or (
        f"→ {task.assignee}" if task.assignee else ""), when)


def _last_failure(body: str) -> str:
    """The reason of the task's last failed attempt (its last `## Attempt N failed`)."""
    _, sep, rest = body.rpartition("\n## Attempt ")
    if not sep:
        return ""
    lines = [line.strip() for line in rest.splitlines()[1:] if line.strip()]
    return lines[0] if lines else ""
