"""Which MCP tools a ROM's `tools:` allows, and which names the model may be offered
(the calls themselves, with real servers: test_mcp_hive)."""

from __future__ import annotations

from typing import Any

import pytest

from hivemind.mcp.api import McpResult, McpTool
from hivemind.tools.mcp import McpToolbox, mcp_allowed


@pytest.mark.parametrize(("allow", "tool", "allowed"), [
    (None, "lookup", True),
    (["read_file"], "lookup", False),
    (["mcp__notes"], "lookup", True),
    (["mcp__notes__lookup"], "lookup", True),
    (["mcp__notes__lookup"], "delete", False),
    (["mcp__note"], "lookup", False),
    (["mcp__other"], "lookup", False),
], ids=["no-list", "builtin-only", "whole-server", "that-tool", "another-tool", "prefix",
        "other-server"])
def test_the_allow_list_names_a_server_or_its_tools(
    allow: list[str] | None, tool: str, allowed: bool
) -> None:
    assert mcp_allowed(allow, "notes", tool) is allowed


def test_a_tool_name_the_api_would_refuse_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    class OneServer:  # the pool's side of the seam, reduced to what it lists
        def tools_for(self, agent: str) -> list[McpTool]:
            return [McpTool("notes", "find.all", "", {}), McpTool("notes", "x" * 60, "", {}),
                    McpTool("notes", "lookup", "Look up", {"type": "object"})]

        async def call(self, *args: Any, **kwargs: Any) -> McpResult:
            raise AssertionError("not called")

    box = McpToolbox(OneServer(), 100)
    assert [s.name for s in box.specs("lead", None)] == ["mcp__notes__lookup"]
    assert "its tool 'find.all' is left out" in caplog.text
