"""MCP servers' tools as the model is offered them, and their calls.

The pool (`hivemind.mcp`) runs the servers; this is what an agent sees of them: each
ready server's tools as `mcp__<server>__<tool>` after the built-in ones (the
server's description, its input schema compacted as ours are, in a stable order, so
they sit in the cached prefix), allowed by the ROM's `tools:` as a built-in tool is
(`mcp__<server>__<tool>`, or `mcp__<server>` for all of a server's; no `tools:`: all),
and their calls run through the pool with the cap of `read_file`. A server's
problem (crash, hang, an error it returns) comes back to the model as a tool error.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from hivemind.llm.base import ToolCall, ToolResult, ToolSpec
from hivemind.mcp.api import McpResult, McpTool
from hivemind.mcpspec import TOOL_PREFIX, split_tool_name
from hivemind.settings import AgentConfig
from hivemind.tools.schema import compact_schema

logger = logging.getLogger(__name__)

VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""A tool name the Messages API takes: a server's tool named otherwise (`notes.find`,
or too long once prefixed) is left out, or every request would be refused."""


class McpSource(Protocol):
    """What the toolbox needs of the pool (`hivemind.mcp.pool.McpPool`)."""

    def tools_for(self, agent: str) -> list[McpTool]: ...

    async def call(self, agent: str, server: str, tool: str,
                   arguments: Mapping[str, Any] | None = None, *,
                   max_chars: int = ...) -> McpResult: ...


def mcp_allowed(allow: Sequence[str] | None, server: str, tool: str) -> bool:
    """Whether a ROM's `tools:` (None: every tool) lets the agent use this server's tool."""
    return allow is None or f"{TOOL_PREFIX}{server}" in allow or (
        f"{TOOL_PREFIX}{server}__{tool}" in allow)


class McpToolbox:
    """The agents' MCP tools, from the pool; one per daemon (its lead process)."""

    def __init__(self, source: McpSource, max_chars: int) -> None:
        self.source = source
        self.max_chars = max_chars
        self._specs: dict[tuple[str, str, str], ToolSpec] = {}
        self._told: set[str] = set()  # tool names left out, said once

    def tools(self, agent: str, allow: Sequence[str] | None) -> list[McpTool]:
        """The agent's tools now (its servers that are ready), allowed by `allow`, in a
        stable order: by server, then by tool name."""
        return sorted((t for t in self.source.tools_for(agent)
                       if mcp_allowed(allow, t.server, t.name) and self._valid(t)),
                      key=lambda t: (t.server, t.name))

    def _valid(self, tool: McpTool) -> bool:
        if VALID_NAME.match(tool.full_name):
            return True
        if tool.full_name not in self._told:
            self._told.add(tool.full_name)
            logger.warning("MCP server `%s`: its tool %r is left out: as %s its name is not "
                           "one a model takes (letters, digits, _ and -, at most 64)",
                           tool.server, tool.name, tool.full_name)
        return False

    def specs(self, agent: str, allow: Sequence[str] | None) -> list[ToolSpec]:
        return [self._spec(t) for t in self.tools(agent, allow)]

    def _spec(self, tool: McpTool) -> ToolSpec:
        key = (tool.full_name, tool.description, repr(tool.input_schema))
        spec = self._specs.get(key)
        if spec is None:
            if len(self._specs) > 4096:  # servers restarted with other tools, again and again
                self._specs.clear()
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            spec = self._specs[key] = ToolSpec(
                name=tool.full_name, description=tool.description or tool.name,
                input_schema=compact_schema({"type": "object", **schema}))
        return spec

    async def execute(self, agent: str, config: AgentConfig, call: ToolCall) -> ToolResult:
        """Run one call of a server's tool; every problem is the model's to see."""
        server, tool = split_tool_name(call.name) or ("", "")
        if not any(t.full_name == call.name for t in self.tools(agent, config.tools)):
            return _error(call, f"unknown tool {call.name!r}: " + (
                f"MCP server `{server}` is not ready (see `hivemind status`)"
                if server in config.mcp and mcp_allowed(config.tools, server, tool)
                else "not one of your tools"))
        if call.input_error is not None:
            return _error(call, f"invalid input for {call.name}: {call.input_error}")
        try:
            result = await self.source.call(agent, server, tool, dict(call.input),
                                            max_chars=self.max_chars)
        except Exception as exc:  # the pool promises none; a bug there must not end the cycle
            logger.exception("%s: MCP call %s failed", agent, call.name)
            return _error(call, f"MCP server `{server}`: {type(exc).__name__}: {exc}")
        text = result.text
        if result.cut and "more characters cut" not in text[-200:]:
            text += f"\n[... {result.cut} more characters cut]"
        return ToolResult(tool_use_id=call.id, content=text or "(no output)",
                          is_error=result.is_error)


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(tool_use_id=call.id, content=message, is_error=True)
