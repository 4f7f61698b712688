"""Which MCP tools a ROM's `tools:` allows (the calls themselves: test_mcp_hive)."""

from __future__ import annotations

import pytest

from hivemind.tools.mcp import mcp_allowed


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
