"""Pydantic validation errors said in one line a person can act on.

`priority must be one of critical, high, medium, low (got 'urgent')`, not a
pydantic error dump; the caller adds the file and the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

Loc = tuple[int | str, ...]

_QUOTED = re.compile(r"'([^']*)'")


def field_name(loc: Loc) -> str:
    """`budget.per_day`, `depends_on[2]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "front matter"


def show(value: Any, limit: int = 40) -> str:
    """A short repr of a bad value for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _choices(expected: str) -> str:
    found = _QUOTED.findall(expected)
    return ", ".join(found) if found else expected


_UNKNOWN_FIELD_HINTS = {
    "agents.memory": "the long-term store is shared, so its settings are the hive's, in "
    "[memory]; an agent's own are [agents.retrieval] and [agents.memory_tiers]",
}
"""Fields people give in the wrong place, and where they belong."""


def describe(error: ErrorDetails) -> str:
    """One error as `field must be ... (got ...)`."""
    field = field_name(error["loc"])
    kind = error["type"]
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    got = f" (got {show(error.get('input'))})"
    simple = {
        "int_type": "must be a whole number",
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be text",
        "list_type": "must be a list",
        "dict_type": "must be a mapping of `key: value`",
        "model_type": "must be a mapping of `key: value`",
        "model_attributes_type": "must be a mapping of `key: value`",
        "datetime_type": "must be a date and time like 2026-01-31T12:00:00Z",
        "datetime_parsing": "must be a date and time like 2026-01-31T12:00:00Z",
        "datetime_from_date_parsing": "must be a date and time like 2026-01-31T12:00:00Z",
    }
    if kind in simple:
        return f"{field} {simple[kind]}{got}"
    if kind in ("enum", "literal_error"):
        return f"{field} must be one of {_choices(str(ctx.get('expected', '')))}{got}"
    bounds = {
        "greater_than_equal": ("≥", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("≤", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        sign, key = bounds[kind]
        bound = ctx.get(key)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # "> 0", not "> 0.0"
        return f"{field} must be {sign} {bound}{got}"
    if kind == "missing":
        return f"{field} is required"
    if kind == "extra_forbidden":
        hint = _UNKNOWN_FIELD_HINTS.get(field)
        return f"{field} is not a known field" + (f": {hint}" if hint else "")
    if kind == "string_pattern_mismatch":
        return f"{field} must match {ctx.get('pattern')}{got}"
    if kind == "string_too_short":
        return f"{field} must not be empty"
    message = error["msg"].removeprefix("Value error, ")
    if message.startswith(("id ", field)):
        return message
    return f"{field}: {message[:1].lower()}{message[1:]}"


SHOWN = 5
"""Problems listed in one message; past these, `(and N more problems)`."""


def every_problem(
    exc: ValidationError, line_of: Callable[[Loc], int | None] = lambda loc: None
) -> tuple[int | None, str]:
    """The first problem's line, and every problem in one line a person can act on:
    `a must be ...; line 5: b must be ...` (the first one's line is the caller's to show)."""
    errors = exc.errors(include_url=False)
    parts, first_line = [], None
    for n, error in enumerate(errors[:SHOWN]):
        line, text = line_of(tuple(error["loc"])), describe(error)
        if n == 0:
            first_line = line
        elif line is not None:
            text = f"line {line}: {text}"
        parts.append(text)
    text = "; ".join(parts)
    if len(errors) > SHOWN:
        more = len(errors) - SHOWN
        text += f" (and {more} more problem{'s' if more > 1 else ''})"
    return first_line, text


def first_problem(exc: ValidationError) -> tuple[Loc, str]:
    """Where the first problem is, and every problem (see `every_problem`)."""
    return tuple(exc.errors(include_url=False)[0]["loc"]), every_problem(exc)[1]
