"""A tool's input schema as the model is sent it: pydantic's, less what says nothing.

Every request carries every allowed tool's schema, so each word is paid for on every
call. Left out: `title` keywords (the property name says it), the `null` branch of
an optional field and defaults that say nothing (null, "", false: the field is
optional by not being `required`),
`minLength: 1` and the safety caps of long texts (the tool still checks them and
says so in its error); a `$ref` to a definition is replaced by the definition, a
choice of plain types (a name or a list of names) is said as a list of types, the
`type` of an enum of strings is left to its values, and a whole-number bound of a
number is written as an integer (`1`, not `1.0`).
"""

from __future__ import annotations

from typing import Any

SAFETY_CAP = 200
"""A `maxLength` from here up is a safety cap, not guidance for the model: no title,
subject, tag or note it is asked for comes near it (a text past it is refused, saying
so)."""

_NULL = {"type": "null"}


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema without titles, null branches, null defaults and safety caps."""
    defs = schema.get("$defs", {})
    defs = defs if isinstance(defs, dict) else {}
    kept: set[str] = set()
    out = _compact(schema, defs, (), kept)
    out.pop("$defs", None)
    if kept:  # a recursive definition (a tree) stays a reference, with its definition
        out["$defs"] = defs
    return out


def _compact(node: dict[str, Any], defs: dict[str, Any], within: tuple[str, ...],
             kept: set[str]) -> dict[str, Any]:
    """`node` compacted; `within`: the definitions being expanded around it, `kept`
    gets those left as a `$ref` (to itself: it would expand forever)."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        target = defs.get(name)
        if name in within:
            kept.add(name)
        elif isinstance(target, dict):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **rest}
            within = (*within, name)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and _says_nothing(value)):
            continue
        if key == "minLength" and value == 1:
            continue
        if key == "maxLength" and isinstance(value, int) and value >= SAFETY_CAP:
            continue
        if key == "type" and value == "string" and _all_strings(node.get("enum")):
            continue
        if key in _BOUNDS and isinstance(value, float) and value.is_integer():
            out[key] = int(value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _compact(sub, defs, within, kept) if isinstance(sub, dict)
                        else sub for name, sub in value.items()}
        elif key == "items" and isinstance(value, dict):
            out[key] = _compact(value, defs, within, kept)
        elif key == "anyOf" and isinstance(value, list):
            branches = [_compact(b, defs, within, kept) if isinstance(b, dict) else b
                        for b in value if b != _NULL]
            if len(branches) == 1 and isinstance(branches[0], dict):
                out.update(branches[0])
            elif all(isinstance(b, dict) for b in branches) and (
                    merged := _type_list(branches)) is not None:
                out.update(merged)
            else:
                out[key] = branches
        else:
            out[key] = value
    return out


def _says_nothing(default: Any) -> bool:
    """A default an optional field has anyway: null, "" or false (not 0: a number)."""
    return default is None or default is False or default == ""


def _type_list(branches: list[dict[str, Any]]) -> dict[str, Any] | None:
    """`{"type": [...]}` for branches that are each a plain type (one of them may be an
    array, with its `items`); None if they say more than that."""
    types: list[Any] = []
    merged: dict[str, Any] = {}
    for branch in branches:
        kind = branch.get("type")
        extra = set(branch) - {"type", "items"}
        if not isinstance(kind, str) or kind in types or extra or (
            "items" in branch and kind != "array"
        ):
            return None
        types.append(kind)
        if "items" in branch:
            merged["items"] = branch["items"]
    return {"type": types, **merged}


_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


def _all_strings(values: Any) -> bool:
    """True for a non-empty list of strings (an enum whose values say their type)."""
    return isinstance(values, list) and bool(values) and all(isinstance(v, str) for v in values)
