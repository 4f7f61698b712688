"""Which of the agent's tasks a tool call concerns.

A cycle may hold several tasks, and the model's calls each work on one of them
(or on all). Knowing which lets a task's end consolidate only its own steps, and
lets the loop breaker stop only the task that loops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NAMING_FIELDS = ("task_id", "task")
"""Input fields that name a task outright (complete_task, fail_task, send_message)."""

SHORT_TEXT = 500
"""Longer strings are content (a file's text, a message's body), not addressing: a
task id they mention says nothing about which task the call is for."""


def concerned_tasks(call_input: Mapping[str, Any], held: Sequence[str]) -> list[str]:
    """The ids among `held` that the call with `call_input` is for.

    A task named in `task_id` or `task`; else the tasks whose ids appear as whole
    words in the call's short strings (a path like `workspace/<id>.md`, a subject,
    a title); else, when nothing tells, every task held (the call serves them all).
    """
    return named_tasks(call_input, held) or list(held)


def named_tasks(call_input: Mapping[str, Any], held: Sequence[str]) -> list[str]:
    """The ids among `held` that the call names (as `concerned_tasks`); [] if none."""
    named = [v for k in NAMING_FIELDS if isinstance(v := call_input.get(k), str) and v in held]
    if named:
        return list(dict.fromkeys(named))
    texts = _short_strings(call_input)
    return [t for t in held if any(_mentions(text, t) for text in texts)]


def _short_strings(call_input: Mapping[str, Any]) -> list[str]:
    """The call's top-level strings (and strings in top-level lists) that are short."""
    texts: list[str] = []
    for value in call_input.values():
        items = value if isinstance(value, list) else [value]
        texts.extend(v for v in items if isinstance(v, str) and len(v) <= SHORT_TEXT)
    return texts


def _mentions(text: str, task_id: str) -> bool:
    """True if `task_id` is in `text` as a whole word: not inside a longer id (`t1` is
    not in `t10` or `t1-b`)."""
    start = text.find(task_id)
    while start != -1:
        end = start + len(task_id)
        if not (start and _in_id(text[start - 1])) and not (end < len(text) and _in_id(text[end])):
            return True
        start = text.find(task_id, start + 1)
    return False


def _in_id(char: str) -> bool:
    return char.isalnum() or char in "_-"
