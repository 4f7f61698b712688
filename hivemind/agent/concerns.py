"""Which of the agent's tasks a tool call concerns.

A cycle may hold several tasks, and the model's calls each work on one of them
(or on all). Knowing which lets a task's end consolidate only its own steps, and
lets the loop breaker stop only the task that loops.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
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
    if not held:
        return []
    named = [v for k in NAMING_FIELDS if isinstance(v := call_input.get(k), str) and v in held]
    if named:
        return list(dict.fromkeys(named))
    pattern = _mention_pattern(tuple(held))
    found: dict[str, None] = {}
    for text in _short_strings(call_input):
        for match in pattern.finditer(text):
            found[match.group(0)] = None
    return list(found) or list(held)


def _short_strings(call_input: Mapping[str, Any]) -> list[str]:
    """The call's top-level strings (and strings in top-level lists) that are short."""
    texts: list[str] = []
    for value in call_input.values():
        items = value if isinstance(value, list) else [value]
        texts.extend(v for v in items if isinstance(v, str) and len(v) <= SHORT_TEXT)
    return texts


@lru_cache(maxsize=256)
def _mention_pattern(held: tuple[str, ...]) -> re.Pattern[str]:
    """Any of `held` as a whole word: not inside a longer id (`t1` is not in `t10` or
    `t1-b`); the longest first, so `t1-b` is found as itself and not as `t1`."""
    ids = sorted(held, key=len, reverse=True)
    return re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, ids)) + r")(?![\w-])")
