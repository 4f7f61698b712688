"""The tasks on the board, listed for people (`hivemind task list`): read only.

Listing never moves a file: an unreadable one in tasks/ is shown with its problem
(the daemon rejects it), and a rejected one with its reason file's text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from hivemind.fs.filenames import shown
from hivemind.hive.layout import Hive
from hivemind.hive.quarantine import read_reason
from hivemind.hive.tasks.listing import md_files, read_each

STATES = ("pending", "active", "done", "failed", "rejected")
"""The folders a task can be in, in the order it moves through them."""


class ListedTask(BaseModel):
    """One task file as `hivemind task list` shows it."""

    state: str
    id: str
    title: str = ""
    priority: str = ""
    assignee: str | None = None
    agent: str | None = None  # who holds it (active) or finished it (done, failed)
    path: str
    changed_at: datetime
    problem: str | None = None  # unreadable (pending) or why it was rejected


def list_tasks(hive: Hive, states: Iterable[str] = STATES) -> list[ListedTask]:
    """The task files in the folders of `states`, each folder's newest first."""
    out: list[ListedTask] = []
    wanted = set(states)
    for state in STATES:
        if state in wanted:
            out.extend(sorted(_listed(hive, state), key=lambda t: t.changed_at, reverse=True))
    return out


def _folders(hive: Hive, state: str) -> Iterator[tuple[Path, str | None]]:
    """The folders of `state`, each with the agent it belongs to (active/<agent>/)."""
    if state == "pending":
        yield hive.tasks_dir, None
    elif state == "active":
        try:
            names = sorted(e.name for e in os.scandir(hive.active_dir)
                           if e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            names = []
        for name in names:
            yield hive.active_dir_for(name), name
    else:
        yield {"done": hive.done_dir, "failed": hive.failed_dir,
               "rejected": hive.rejected_dir}[state], None  # fmt: skip


def _listed(hive: Hive, state: str) -> Iterator[ListedTask]:
    for folder, holder in _folders(hive, state):
        if state == "rejected":
            for path, st in md_files(folder):
                yield ListedTask(state=state, id=shown(path.stem), path=_shown_path(hive, path),
                                 changed_at=datetime.fromtimestamp(st.st_mtime, UTC),
                                 problem=_reason(path))  # fmt: skip
            continue
        for path, st, task in read_each(folder):
            when = datetime.fromtimestamp(st.st_mtime, UTC)
            where = _shown_path(hive, path)
            if isinstance(task, str):
                yield ListedTask(state=state, id=shown(path.stem), agent=holder, path=where,
                                 changed_at=when, problem=task)  # fmt: skip
                continue
            agent = holder or (task.agent if state in ("done", "failed") else None)
            yield ListedTask(
                state=state, id=task.id, title=task.title, priority=task.priority.value,
                assignee=task.assignee, agent=agent, path=where, changed_at=when,
            )  # fmt: skip


def _shown_path(hive: Hive, path: Path) -> str:
    """`path` relative to the hive, for people: a name that is not UTF-8 as `caf\\xe9.md`."""
    return shown(hive.relative(path))


def _reason(path: Path) -> str | None:
    return shown(" ".join(read_reason(path).split())) or None

