"""A ROM names its MCP servers (`mcp:`, or Claude Code's `mcpServers`); its `tools:`
may allow their tools; a mistake is one line naming the ROM and the server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hivemind.errors import ConfigError
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.settings import AgentSettings

NOTES = "mcp:\n  notes:\n    command: python3\n    args: [tools/notes_server.py]\n"


def told(roms: RomRegistry, name: str) -> list[str]:
    """The ROM's warnings but the one that its untrusted servers do not start."""
    return [w for w in roms.warnings(name) if "not trusted" not in w]


def put(hive: Hive, name: str, front: str) -> Path:
    path = hive.rom_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}---\nWork.\n")
    return path


@pytest.fixture
def hive(tmp_path: Path) -> Hive:
    return Hive(tmp_path).ensure()


def test_servers_are_read_with_their_settings(hive: Hive) -> None:
    put(hive, "a", NOTES + "    env: {NOTES_DIR: knowledge}\n    timeout: 30s\n"
        "  search:\n    url: http://127.0.0.1:8765/mcp\n")
    cfg = RomRegistry(hive, AgentSettings()).load("a")
    assert list(cfg.mcp) == ["notes", "search"]
    assert cfg.mcp["notes"].args == ("tools/notes_server.py",)
    assert cfg.mcp["notes"].timeout == 30.0
    assert cfg.mcp["search"].transport == "http"


@pytest.mark.parametrize(("front", "said"), [
    ("mcp:\n  notes:\n    comand: python3\n", "mcp.notes.comand is not a known field"),
    ("mcp:\n  notes: {command: x, url: 'http://a'}\n", "mcp.notes: give either `command`"),
    ("mcp:\n  notes: {}\n", "mcp.notes: give either `command`"),
    ("mcp:\n  bad name: {command: x}\n", "server name 'bad name' must be"),
    ("mcp: [notes]\n", "mcp: must map server names"),
    ("mcp:\n  web: {url: 'ftp://x'}\n", "mcp.web.url"),
], ids=["typo", "both", "neither", "bad-name", "a-list", "not-http"])
def test_a_bad_block_is_one_line_naming_the_rom_and_the_server(
    hive: Hive, front: str, said: str
) -> None:
    put(hive, "a", front)
    with pytest.raises(ConfigError) as exc:
        RomRegistry(hive, AgentSettings()).load("a")
    assert str(exc.value).startswith("agents/a/ROM.md: line ")
    assert said in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_bad_edit_keeps_the_last_good_servers(hive: Hive) -> None:
    path = put(hive, "a", NOTES)
    roms = RomRegistry(hive, AgentSettings())
    assert list(roms.load("a").mcp) == ["notes"]
    path.write_text("---\nmcp:\n  notes: {comand: x}\n---\nWork.\n")
    os.utime(path, (1, 1))
    assert list(roms.load("a").mcp) == ["notes"]
    assert "mcp.notes.comand" in (roms.error("a") or "")


def test_tools_may_name_a_server_or_one_of_its_tools(hive: Hive) -> None:
    put(hive, "a", NOTES + "tools: [read_file, mcp__notes__lookup, complete_task]\n")
    put(hive, "b", NOTES + "tools: [mcp__notes, complete_task]\n")
    roms = RomRegistry(hive, AgentSettings())
    assert roms.load("a").tools == ["read_file", "mcp__notes__lookup", "complete_task"]
    assert roms.load("b").tools == ["mcp__notes", "complete_task"]
    assert told(roms, "a") == told(roms, "b") == []


def test_a_tool_of_a_server_the_rom_does_not_name_is_left_out_and_told(hive: Hive) -> None:
    put(hive, "a", NOTES + "tools: [read_file, mcp__nots__lookup, complete_task]\n")
    roms = RomRegistry(hive, AgentSettings())
    tools = roms.load("a").tools or []
    assert "read_file" in tools
    assert not [t for t in tools if t.startswith("mcp__")]
    left_out, none_of_notes = told(roms, "a")
    assert "mcp__nots__lookup left out: this ROM names no such MCP server" in left_out
    assert none_of_notes.startswith("MCP server `notes`: `tools:` allows none of its tools")


def test_claude_code_mcp_servers_are_the_rom_servers(hive: Hive) -> None:
    put(hive, "a", "description: Looks things up.\nmcpServers:\n"
        "  - notes: {type: stdio, command: python3, args: [s.py]}\n  - github\n"
        "tools: Read, mcp__notes__lookup\n")
    roms = RomRegistry(hive, AgentSettings())
    cfg = roms.load("a")
    assert cfg.mcp["notes"].command == "python3"
    assert "mcp__notes__lookup" in (cfg.tools or [])
    [warning] = told(roms, "a")
    assert "'github' is a server configured in Claude Code" in warning


def test_denying_one_tool_of_a_server_is_refused(hive: Hive) -> None:
    put(hive, "a", NOTES + "disallowedTools: mcp__notes__delete\n")
    with pytest.raises(ConfigError, match="one tool of an MCP server cannot be denied"):
        RomRegistry(hive, AgentSettings()).load("a")


def test_denying_a_whole_server_keeps_the_others(hive: Hive) -> None:
    put(hive, "a", NOTES + "  web: {url: 'http://127.0.0.1:1/mcp'}\n"
        "disallowedTools: mcp__notes\n")
    tools = RomRegistry(hive, AgentSettings()).load("a").tools or []
    assert "mcp__web" in tools
    assert "mcp__notes" not in tools
    assert "read_file" in tools
