"""Pending tasks assigned to a name the hive has no agent for: they wait in tasks/.

`hivemind status` lists them whether or not a daemon runs. Only the files that
mention `assignee` at all are parsed, so a board of thousands costs a read each.
"""

from __future__ import annotations

import os

from hivemind.errors import FileFormatError
from hivemind.hive.frontmatter import MAX_FILE_BYTES, task_from_text
from hivemind.hive.layout import Hive
from hivemind.hive.links import task_file_problem
from hivemind.hive.tasks.listing import md_files
from hivemind.hive.tasks.routing import unknown_assignee

SHOWN = 50
"""Tasks listed at most (a count of the others follows)."""


def waiting_for_no_agent(hive: Hive, agents: list[str]) -> list[str]:
    """One line per pending task whose `assignee` is none of `agents`, by file name."""
    known = set(agents)
    lines: list[str] = []
    for path, st in md_files(hive.tasks_dir):
        if task_file_problem(hive, st) is not None or st.st_size > MAX_FILE_BYTES:
            continue  # a link, a huge file: the daemon rejects it unread, status says why
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(MAX_FILE_BYTES + 1)
        except OSError:
            continue
        if b"assignee" not in data:
            continue
        try:
            task = task_from_text(data.decode("utf-8"), path)
        except (UnicodeDecodeError, FileFormatError):
            continue
        if task.assignee and task.assignee not in known:
            lines.append(f"{task.id} is {unknown_assignee(task.id, task.assignee)}")
    lines.sort()
    if len(lines) > SHOWN:
        lines = [*lines[:SHOWN], f"… and {len(lines) - SHOWN} more"]
    return lines
