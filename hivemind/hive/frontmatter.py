"""Tasks, messages and ROM.md files: typed readers and writers over `document`.

Errors raise `FileFormatError` with the line of the bad field
(`line 3: priority must be one of critical, high, medium, low (got 'urgent')`);
unknown front matter keys are kept in `extra` and logged as a warning (a ROM's are
told by `hivemind status`: see `romfront`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hivemind.errors import FileFormatError
from hivemind.hive.document import (
    MAX_FILE_BYTES,
    Document,
    first_heading,
    load,
    parse,
    read_text,
    render,
    split,
)
from hivemind.hive.models import Message, Task
from hivemind.hive.romfront import ToolFieldError, read_front
from hivemind.problems import did_you_mean, every_problem
from hivemind.settings import AgentConfig, AgentSettings

__all__ = [
    "MAX_FILE_BYTES",
    "Document",
    "first_heading",
    "load",
    "message_from_text",
    "message_front",
    "parse",
    "read_message",
    "read_rom",
    "read_task",
    "read_text",
    "render",
    "render_message",
    "render_task",
    "rom_and_warnings",
    "rom_from_document",
    "split",
    "task_from_document",
    "task_from_text",
    "task_front",
]

logger = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)


# -- typed readers -------------------------------------------------------------


def _aliases(model: type[BaseModel], exclude: Iterable[str]) -> frozenset[str]:
    skip = set(exclude)
    return frozenset(
        (info.alias or name) for name, info in model.model_fields.items() if name not in skip
    )


_TASK_KEYS = _aliases(Task, ("body", "extra"))
_MESSAGE_KEYS = _aliases(Message, ("body", "extra"))
_ROM_KEYS = _aliases(AgentConfig, ("name", "instructions", "extra"))


def _known_and_extra(doc: Document, known: frozenset[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in doc.front.items():
        if key in known:
            fields[key] = value
        else:
            extra[key] = value
            line = doc.line_of((key,))
            where = f"line {line}: " if line else ""
            logger.warning("%s: %sunknown field %r kept as extra%s", doc.path, where, key,
                           did_you_mean(str(key), sorted(known)))
    return fields, extra


def _validate(model: type[_M], data: dict[str, Any], doc: Document) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        line, problem = every_problem(exc, doc.line_of)
        raise FileFormatError(doc.path, problem, line) from None


def task_from_document(doc: Document) -> Task:
    """A Task from a parsed task file (id = file stem, title = first heading by default)."""
    fields, extra = _known_and_extra(doc, _TASK_KEYS)
    fields.setdefault("id", doc.path.stem)
    if not fields.get("title"):
        fields["title"] = first_heading(doc.body) or str(fields["id"])
    return _validate(Task, {**fields, "body": doc.body, "extra": extra}, doc)


def read_task(path: Path) -> Task:
    """Read a task file; FileFormatError says what is wrong and on which line."""
    return task_from_document(load(path))


def task_from_text(text: str, path: Path) -> Task:
    """`read_task` on text already read from `path` (see `StatCache.load`)."""
    return task_from_document(parse(text, path))


def mailbox_owner(path: Path) -> str:
    """`bob` for `mailboxes/bob/new/x.md`."""
    return path.parent.parent.name if path.parent.name in ("new", "cur", "tmp") else "unknown"


def read_message(path: Path) -> Message:
    """Read a message; without front matter it is a raw message from `unknown`."""
    return message_from_text(read_text(path), path)


def message_from_text(text: str, path: Path) -> Message:
    """`read_message` on text already read from `path` (see `StatCache.load`)."""
    doc = parse(text, path)
    fields, extra = _known_and_extra(doc, _MESSAGE_KEYS)
    fields.setdefault("id", path.stem)
    fields.setdefault("to", mailbox_owner(path))
    return _validate(Message, {**fields, "body": doc.body, "extra": extra}, doc)


def read_rom(path: Path, name: str, defaults: AgentSettings) -> AgentConfig:
    """An agent's config: hive defaults overridden by the ROM's fields; body = instructions."""
    return rom_from_document(load(path), name, defaults)


def rom_from_document(doc: Document, name: str, defaults: AgentSettings) -> AgentConfig:
    """`read_rom` on a parsed ROM.md."""
    return rom_and_warnings(doc, name, defaults)[0]


def rom_and_warnings(
    doc: Document, name: str, defaults: AgentSettings
) -> tuple[AgentConfig, list[str]]:
    """`rom_from_document`, and what in the front matter the agent runs without
    (unknown fields, Claude Code tools no hive tool matches, a `name:` not its own)."""
    try:
        front = read_front(doc.front, name, _ROM_KEYS, doc.line_of)
    except ToolFieldError as exc:
        raise FileFormatError(doc.path, str(exc), doc.line_of((exc.key,))) from None
    fields, extra = front.fields, front.extra
    data: dict[str, Any] = defaults.model_dump()
    for key, value in fields.items():
        # `budget: {per_day: 5}` overrides one key of the hive's budget, not all of it.
        if isinstance(data.get(key), dict) and isinstance(value, dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    data.update(name=name, instructions=doc.body.strip(), extra=extra)
    return _validate(AgentConfig, data, doc), front.warnings


# -- writing -------------------------------------------------------------------


def task_front(task: Task) -> dict[str, Any]:
    """The front matter of a task: id first, fields that differ from the defaults, extra."""
    data = task.model_dump(exclude={"body", "extra"}, exclude_defaults=True)
    front: dict[str, Any] = {"id": task.id, "title": task.title, **data}
    front.update({k: v for k, v in task.extra.items() if k not in front})
    return front


def render_task(task: Task) -> str:
    """A task file's full text."""
    return render(task_front(task), task.body)


def message_front(message: Message) -> dict[str, Any]:
    """The front matter of a message (unset optional fields left out)."""
    data = message.model_dump(exclude={"body", "extra"}, by_alias=True, exclude_none=True)
    data.update({k: v for k, v in message.extra.items() if k not in data})
    return data


def render_message(message: Message) -> str:
    """A message file's full text."""
    return render(message_front(message), message.body)
