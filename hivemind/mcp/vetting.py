"""What of a server's tool list may reach the model: a hive's server could offer
thousands of tools, megabytes of descriptions or a schema the Messages API refuses
(then every request of its agents would fail). Descriptions are cut; a tool whose input
schema is not valid JSON Schema, or too large, is left out; past `MAX_TOOLS` the rest
are left out. What was left out is said in one line (the server's `error` in status).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import Draft202012Validator

from hivemind.mcp.api import McpTool

MAX_TOOLS = 128
"""Tools offered of one server (by name): more would fill the prompt."""
MAX_DESCRIPTION = 2048
"""Characters of a tool's description (Claude Code cuts at as many)."""
MAX_SCHEMA_CHARS = 16_384
"""A tool's input schema as compact JSON."""
MAX_LIST_CHARS = 100_000
"""A server's offered tools together (descriptions and schemas): ~25,000 tokens."""
MAX_DEPTH = 64
"""Levels of a tool's input schema (what walks it recurses)."""
_CUT = "… [cut]"
_known: dict[str, str | None] = {}  # a schema's JSON → why it is refused (None: valid)


def vet_tools(tools: Sequence[McpTool]) -> tuple[list[McpTool], str | None]:
    """The tools that may be offered (descriptions cut to size), by name, and one line
    on what was left out or cut (None: nothing)."""
    kept: list[McpTool] = []
    refused: list[str] = []
    cut = 0
    room = MAX_LIST_CHARS
    ordered = sorted(tools, key=lambda t: t.name)
    for tool in ordered[:MAX_TOOLS]:
        why = schema_problem(tool.input_schema)
        if why is not None:
            refused.append(f"`{tool.name[:64]}` ({why})")
            continue
        if len(tool.description) > MAX_DESCRIPTION:
            cut += 1
            tool = McpTool(tool.server, tool.name,  # noqa: PLW2901
                           tool.description[:MAX_DESCRIPTION - len(_CUT)] + _CUT,
                           tool.input_schema)
        room -= len(tool.description) + len(json.dumps(tool.input_schema))
        if room < 0:
            break
        kept.append(tool)
    told = []
    if len(ordered) > MAX_TOOLS:
        told.append(f"it offers {len(ordered)} tools: only the first {MAX_TOOLS} by name "
                    "are offered")
    if room < 0:
        told.append(f"its tools past `{ordered[len(kept) + len(refused)].name[:64]}` are "
                    f"left out: together they are over {MAX_LIST_CHARS} characters")
    if refused:
        shown = ", ".join(refused[:3]) + (f" and {len(refused) - 3} more"
                                          if len(refused) > 3 else "")
        told.append(f"{len(refused)} tool{'s' if len(refused) > 1 else ''} left out: "
                    f"{shown}")
    if cut:
        told.append(f"{cut} description{'s' if cut > 1 else ''} cut to {MAX_DESCRIPTION} "
                    "characters")
    return kept, ("; ".join(told)[:600] if told else None)


def schema_problem(schema: Any) -> str | None:
    """Why the Messages API would refuse `schema` as a tool's input schema, in a few
    words; None if it is a valid JSON Schema for an object, small enough."""
    if not isinstance(schema, dict):
        return "its input schema is not an object"
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return "its input schema is not JSON"
    if len(text) > MAX_SCHEMA_CHARS:
        return f"its input schema is {len(text)} characters, over {MAX_SCHEMA_CHARS}"
    if text in _known:
        return _known[text]
    why: str | None = None
    if _depth(schema) > MAX_DEPTH:
        why = f"its input schema nests deeper than {MAX_DEPTH}"
    elif schema.get("type", "object") != "object":
        why = "its input schema is not for an object"
    else:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as e:
            where = "/".join(str(p) for p in e.absolute_path) or "top"
            why = f"invalid input schema at {where}: {' '.join(e.message.split())[:80]}"
        except RecursionError:
            why = "its input schema nests too deep"
    if len(_known) > 4096:
        _known.clear()
    _known[text] = why
    return why


def _depth(value: Any) -> int:
    """How deep `value`'s lists and mappings nest (walked without recursion)."""
    deepest = 0
    todo = [(value, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, dict | list) and depth <= MAX_DEPTH + 1:
            deepest = max(deepest, depth)
            todo.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict)
                                                 else node))
    return deepest
