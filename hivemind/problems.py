"""Pydantic validation errors said in one line a person can act on.

`priority must be one of critical, high, medium, low (got 'urgent')`, not a
pydantic error dump; the caller adds the file and the line.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
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


def did_you_mean(given: str, known: Sequence[str]) -> str:
    """` (did you mean `tools`?)` when `given` is close to one of `known`, else ``."""
    close = difflib.get_close_matches(given, sorted(known), 1, 0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""


def known_fields(model: type[BaseModel], parent: Loc) -> list[str]:
    """The keys the table at `parent` of `model` takes (`('agents',)`: [agents]'s), with
    their aliases; [] where no model says."""
    current: Any = model
    key_next = False
    for part in parent:
        if key_next:  # a mapping's key, such as the model of [pricing."<model>"]
            key_next = False
            continue
        fields = getattr(current, "model_fields", None)
        if not isinstance(part, str) or not isinstance(fields, dict):
            return []
        by_key = {(info.alias or name): info for name, info in fields.items()}
        info = fields.get(part) or by_key.get(part)
        if info is None:
            return []
        current, key_next = _inner(info.annotation)
    fields = getattr(current, "model_fields", None)
    if not isinstance(fields, dict):
        return []
    return sorted({k for name, info in fields.items() for k in (name, info.alias) if k})


def _inner(annotation: Any) -> tuple[Any, bool]:
    """The type a field's table holds, and whether a key (a mapping's) comes first."""
    origin = get_origin(annotation)
    if origin in (dict, Mapping):
        return _inner(get_args(annotation)[1])[0], True
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg, False
    return annotation, False


def describe(error: ErrorDetails, known: Sequence[str] = ()) -> str:
    """One error as `field must be ... (got ...)`; `known`: the keys its table takes,
    for an unknown one's "did you mean"."""
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
        if hint:
            return f"{field} is not a known field: {hint}"
        return f"{field} is not a known field{did_you_mean(str(error['loc'][-1]), known)}"
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
    exc: ValidationError, line_of: Callable[[Loc], int | None] = lambda loc: None,
    model: type[BaseModel] | None = None,
) -> tuple[int | None, str]:
    """The first problem's line, and every problem in one line a person can act on:
    `a must be ...; line 5: b must be ...` (the first one's line is the caller's to show;
    `model`, the one validated, tells the keys an unknown one may have meant)."""
    errors = exc.errors(include_url=False)
    parts, first_line = [], None
    for n, error in enumerate(errors[:SHOWN]):
        loc = tuple(error["loc"])
        unknown = model is not None and error["type"] == "extra_forbidden"
        known = known_fields(model, loc[:-1]) if model is not None and unknown else []
        line, text = line_of(loc), describe(error, known)
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
