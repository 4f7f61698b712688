"""A finished task's file: the person's text kept byte for byte, the outcome added.

A task file is a person's document: comments in its front matter (`# Ticket
JIRA-123`), fields at their defaults (`priority: medium`), its layout. Ending a
task sets only the fields the runtime owns (status, agent, times, attempts) line by
line, adds `id`/`title` if absent (the file may be renamed `<id>-1.md`), and
appends a section to the body; every other line stays as it was.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from hivemind.errors import FileFormatError
from hivemind.hive.document import dump_front, parse
from hivemind.hive.frontmatter import render_task
from hivemind.hive.models import Task

logger = logging.getLogger(__name__)

_FENCE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)
# The lines a top-level field's value may continue on: indented, or a block list item.
_CONTINUATION = re.compile(r"^(?:[ \t]|-[ \t]|-\r?$)")


def ended_text(
    text: str, path: Path, task: Task, owned: tuple[str, ...], heading: str, section: str
) -> str:
    """The text of `path` (read as `text`) once it became `task`: the fields named in
    `owned` set from `task` (a None one taken out), `## heading` + `section` appended to
    the body. Falls back to rendering `task` whole when the front matter cannot be edited
    line by line (e.g. a `{...}` flow mapping)."""
    fields = {key: getattr(task, key) for key in owned}
    out = _edited(text, fields, {"id": task.id, "title": task.title}, heading, section)
    if not _reads_back(out, path, task, owned):
        logger.info("%s: its front matter is rewritten whole (it cannot be edited line by "
                    "line)", path)
        return render_task(task)
    return out


def _reads_back(text: str, path: Path, task: Task, owned: tuple[str, ...]) -> bool:
    """True if `text` reads back as `task` for the fields set and the body (parsed as a
    document only: its unknown fields were warned of when it was first read)."""
    try:
        doc = parse(text, path)
    except FileFormatError:
        return False
    for key in (*owned, "id"):
        want = getattr(task, key)
        got = doc.front.get(key)
        if key == "id" and isinstance(got, int):
            got = str(got)  # `id: 42` names task "42"
        if (want.value if isinstance(want, Enum) else want) != got:
            return False
    return doc.body == task.body


def _edited(
    text: str, fields: Mapping[str, Any], ensure: Mapping[str, Any], heading: str, section: str
) -> str:
    """`text` with `fields` set (None: the line goes), `ensure` added where absent, and
    the section appended."""
    first, newline, rest = text.partition("\n")
    end = _FENCE.search(rest) if first.rstrip() == "---" and newline else None
    if end is None:  # no front matter: one is made for the runtime's fields
        head, front, fence, body = "---\n", "", "---", "\n" + text
    else:
        head, front = first + newline, rest[: end.start()]
        fence, body = rest[end.start() : end.end()], rest[end.end() :]
    lines = front.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for key, value in fields.items():
        lines = _set_field(lines, key, value)
    for key, value in ensure.items():
        if _field_at(lines, key) is None:
            lines = _set_field(lines, key, value)
    base = body.rstrip("\n")
    added = f"## {heading}\n\n{section.strip()}\n"
    body = f"{base}\n\n{added}" if base.strip() else f"\n{added}"
    return head + "".join(lines) + fence + body


@functools.lru_cache(maxsize=64)
def _key_line(key: str) -> re.Pattern[str]:
    """Matches the first line of top-level field `key` (compiled once per key)."""
    return re.compile(rf"^{re.escape(key)}[ \t]*:(?:[ \t]|\r?\n|$)")


def _field_at(lines: list[str], key: str) -> int | None:
    match = _key_line(key).match
    return next((i for i, line in enumerate(lines) if match(line)), None)


def _set_field(lines: list[str], key: str, value: Any) -> list[str]:
    """Every `key:` line (and its continuation lines) out; the new one where the first
    was, or at the end."""
    match = _key_line(key).match
    new = [] if value is None else [dump_front({key: value})]
    if not any(match(line) for line in lines):
        return lines + new
    out, i, placed = [], 0, False
    while i < len(lines):
        if match(lines[i]):
            i += 1
            while i < len(lines) and _CONTINUATION.match(lines[i]):
                i += 1
            if not placed:
                out += new
                placed = True
            continue
        out.append(lines[i])
        i += 1
    return out
