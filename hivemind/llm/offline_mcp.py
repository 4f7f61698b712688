"""The offline provider's MCP calls: a task that says `mcp: <server>.<tool>` in its
front matter (and `mcp_args: {...}` for the call's input) gets that tool called, and
is completed with the result's text (or failed with the error), so a hive shows an
MCP server working end to end with no model.
"""

from __future__ import annotations

from typing import Any

import yaml

from hivemind.llm.base import AssistantTurn, ToolCall, ToolResultsTurn, Turn
from hivemind.mcpspec import tool_name

FOR_TASK = "-mcp-for-"
"""In the id of an MCP call the offline provider makes: the task it is for follows."""
FAIL_CHARS = 1_900


def front_matter(content: str) -> dict[str, Any]:
    """The YAML front matter a task file's text opens with ({} if none, or not YAML)."""
    if not content.startswith("---"):
        return {}
    head, sep, _ = content[3:].partition("\n---")
    if not sep:
        return {}
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def mcp_call(content: str) -> tuple[str, dict[str, Any]] | str | None:
    """(the tool's full name, its input) a task's text asks for; a string: why its
    `mcp:` cannot be read; None: it asks for none."""
    front = front_matter(content)
    wanted = front.get("mcp")
    if wanted is None:
        return None
    server, dot, tool = str(wanted).partition(".")
    if not dot or not server or not tool:
        return f"mcp: {wanted!r} must name a server's tool as <server>.<tool>"
    args = front.get("mcp_args") or {}
    if not isinstance(args, dict):
        return f"mcp_args must be a mapping of the tool's input (got {args!r})"
    return tool_name(server, tool), {str(k): v for k, v in args.items()}


def call_id(n: int, task_id: str) -> str:
    return f"offline-{n}{FOR_TASK}{task_id}"


def endings(turns: list[Turn], offered: set[str]) -> list[ToolCall]:
    """complete_task (with the result's text) or fail_task (with the error) for each MCP
    call of the last round the offline provider made for a task."""
    if len(turns) < 2 or not isinstance(turns[-1], ToolResultsTurn):
        return []
    last = turns[-2]
    names = {c.id: c.name for c in last.tool_calls} if isinstance(last, AssistantTurn) else {}
    calls: list[ToolCall] = []
    for result in turns[-1].results:
        if FOR_TASK not in result.tool_use_id:
            continue
        task_id = result.tool_use_id.split(FOR_TASK, 1)[1]
        name = names.get(result.tool_use_id, "the MCP tool")
        text = result.content.strip() or "(no output)"
        if result.is_error:
            tool, args = "fail_task", {"task_id": task_id, "reason": (
                f"{name} failed: {text}")[:FAIL_CHARS]}
        else:
            tool, args = "complete_task", {"task_id": task_id, "result": text}
        if tool in offered:
            calls.append(ToolCall(id=f"offline-end-{len(calls) + 1}", name=tool, input=args))
    return calls
