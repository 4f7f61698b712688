"""A ROM's front matter before validation: Claude Code subagent fields, tool names, typos.

A Claude Code subagent file (`.claude/agents/x.md`: `name`, `description`, `tools:
Read, Grep`, `color`, ...) is a ROM as it is: its tool names are mapped to the hive's
where one does the same, the others left out with a warning, and it always gets the
tools that end a task. A field neither ours nor Claude Code's is a warning with the
closest name; one that looks like `tools` misspelt makes the ROM invalid, as a
misspelt allow-list would otherwise grant every tool. An MCP server's tools
(`mcp__<server>__<tool>`, or `mcp__<server>` for all of them) stay in `tools:` when the
ROM names that server (`mcp:`, or Claude Code's `mcpServers` of the same shape).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hivemind.settings import TOOL_NAMES, mcp_server_of

CLAUDE_CODE_TOOLS: dict[str, str | None] = {
    "Read": "read_file", "Write": "write_file", "Edit": "edit_file", "MultiEdit": "edit_file",
    "Grep": "search_files", "Glob": "list_files", "LS": "list_files",
    # No hive tool does what these do: left out of the agent's tools.
    "Bash": None, "BashOutput": None, "KillShell": None, "KillBash": None, "WebFetch": None,
    "WebSearch": None, "Task": None, "Agent": None, "TodoWrite": None, "NotebookEdit": None,
    "NotebookRead": None, "SlashCommand": None, "Skill": None, "ExitPlanMode": None,
    "EnterPlanMode": None, "AskUserQuestion": None, "LSP": None,
}
"""Claude Code's tool names and the hive tool that does the same (None: none does)."""

CLAUDE_CODE_FIELDS = frozenset({
    "name", "description", "tools", "disallowedTools", "model", "color", "permissionMode",
    "skills", "hooks", "mcpServers", "maxTurns", "memory",
})
"""The front matter of a Claude Code subagent file, all accepted in a ROM."""

COORDINATION_TOOLS = ("complete_task", "fail_task", "send_message", "wait_for")
"""Granted to every Claude Code agent whatever its `tools:`: it can end the tasks it
is given, answer and say what it waits for (Claude Code has no such tools to name)."""

_TOOL_FIELDS = ("tools", "disallowedTools")
_STORE_SETTINGS = (
    "memory: is ignored: the long-term store (max_items, share_of_budget, reflection, "
    "consolidation) is shared by every agent, so its settings are the hive's, in hive.toml "
    "[memory]; an agent's own are `retrieval:` (the score's weights) and `memory_tiers:`")
_UPPER_OR_MCP = re.compile(r"^(?:[A-Z]|mcp__)")
_PATTERN = re.compile(r"^(\w+)\(.*\)$")  # Claude Code's `Bash(git diff:*)`


@dataclass
class RomFront:
    """The ROM's fields ready for validation, the rest kept aside, and what to tell."""

    fields: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class ToolFieldError(ValueError):
    """A field that would grant tools not meant (`key` names it): `tools` misspelt, or
    a misspelt name in `disallowedTools`."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        super().__init__(problem)


def _names(value: Any) -> Any:
    """`Read, Grep` (Claude Code's comma string) or one name as a list; a list as is."""
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    return value


def _claude_code_tool(name: str) -> tuple[bool, str | None]:
    """(whether `name` is a Claude Code tool, the hive tool doing the same or None)."""
    base = m.group(1) if (m := _PATTERN.match(name)) else name
    if base in CLAUDE_CODE_TOOLS:
        return True, CLAUDE_CODE_TOOLS[base]
    # A Claude Code tool this list does not know yet (or an MCP server's): not ours.
    return bool(_UPPER_OR_MCP.match(name)), None


def map_tools(
    names: Iterable[Any], servers: Collection[str] = ()
) -> tuple[list[Any], list[str], bool]:
    """Hive tool names for `names`, the Claude Code tools left out, and whether any name
    was Claude Code's. A name neither ours nor Claude Code's is kept: validation says
    there is no such tool. An MCP tool of one of `servers` (the ROM's) is kept; of
    another server, left out."""
    out: list[Any] = []
    left_out: list[str] = []
    claude = False
    for name in names:
        if not isinstance(name, str) or name in TOOL_NAMES or mcp_server_of(name) in servers:
            mapped: Any = name
        else:
            known, mapped = _claude_code_tool(name)
            if not known:
                mapped = name
            else:
                claude = True
                if mapped is None:
                    left_out.append(name)
                    continue
        if mapped not in out:
            out.append(mapped)
    return out, left_out, claude


def read_front(
    front: dict[str, Any], folder: str, ours: frozenset[str],
    line_of: Callable[[tuple[str]], int | None],
) -> RomFront:
    """Sort a ROM's front matter (`ours`: the fields AgentConfig takes) for the agent of
    folder `folder`; raise ToolFieldError for a field that looks like a misspelt `tools`."""
    rom = RomFront()

    def at(key: str) -> str:
        line = line_of((key,))
        return f"line {line}: " if line else ""

    known = ours | CLAUDE_CODE_FIELDS
    misspelt: ToolFieldError | None = None
    for given, value in front.items():
        if given == "mcpServers" and "mcp" not in front:
            rom.fields["mcp"] = claude_code_servers(value, rom.warnings, at("mcpServers"))
            continue
        key = str(given)
        if key in ours and key not in _TOOL_FIELDS:
            rom.fields[key] = value
            continue
        squashed = key.lower().replace("_", "").replace("-", "")
        if key in _TOOL_FIELDS:
            rom.fields[key] = value
        elif key == "memory" and isinstance(value, dict):  # Claude Code's is a word
            rom.extra[key] = value
            rom.warnings.append(f"{at(key)}{_STORE_SETTINGS}")
        elif key in known:
            rom.extra[key] = value
        elif "tool" in squashed or difflib.get_close_matches(squashed, ["tools"], 1, 0.8):
            meant = "disallowedTools" if "dis" in squashed else "tools"
            misspelt = misspelt or ToolFieldError(key, (
                f"unknown field {key!r}: did you mean `{meant}`? A misspelt `{meant}` "
                "would grant every tool, so this ROM is not used until it is fixed"))
        else:
            rom.extra[key] = value
            close = difflib.get_close_matches(key, sorted(known), 1, 0.6)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            rom.warnings.append(f"{at(key)}unknown field {key!r} is ignored{hint}")
    if misspelt is not None:  # with the ROM's other slips: all fixed in one edit
        raise ToolFieldError(misspelt.key, "; ".join([str(misspelt), *rom.warnings]))
    _claude_code(rom, folder, at)
    return rom


def _claude_code(rom: RomFront, folder: str, at: Callable[[str], str]) -> None:
    """Claude Code's fields as the hive takes them: `name`, `model: inherit`, tools."""
    name = rom.extra.get("name")
    if name is not None and str(name).strip() != folder:
        rom.warnings.append(
            f"{at('name')}name {str(name)!r} is not the folder's: this agent is {folder!r} "
            f"(its folder's name); rename agents/{folder}/ or change `name:`")
    if rom.fields.get("model") == "inherit":  # Claude Code: the session's model
        del rom.fields["model"]
    claude = "description" in rom.fields  # the field Claude Code requires
    left_out: list[str] = []
    servers = _server_names(rom.fields.get("mcp"))
    if isinstance(names := _names(rom.fields.get("tools")), list):
        rom.fields["tools"], left_out, named_claude = map_tools(names, servers)
        claude = claude or named_claude
    if isinstance(denied_names := _names(rom.fields.pop("disallowedTools", None)), list):
        _no_such_tool_denied(denied_names)
        denied, _, _ = map_tools(denied_names, servers)
        given = rom.fields.get("tools")
        allowed = given if isinstance(given, list) else [
            *TOOL_NAMES, *(f"mcp__{s}" for s in servers)]
        rom.fields["tools"] = [t for t in allowed if t not in denied]
        claude = True
    if claude and isinstance(rom.fields.get("tools"), list):
        rom.fields["tools"] += [t for t in COORDINATION_TOOLS if t not in rom.fields["tools"]]
    mcp_out = [n for n in left_out if mcp_server_of(n) is not None]
    if left_out := [n for n in left_out if n not in mcp_out]:
        rom.warnings.append(
            f"{at('tools')}tools: {', '.join(left_out)} left out: no hive tool does that "
            f"(the agent runs without {'it' if len(left_out) == 1 else 'them'})")
    if mcp_out:
        rom.warnings.append(
            f"{at('tools')}tools: {', '.join(mcp_out)} left out: this ROM names no such MCP "
            f"server under `mcp:` (the agent runs without {'it' if len(mcp_out) == 1 else 'them'})")


def _server_names(value: Any) -> list[str]:
    return [str(k) for k in value] if isinstance(value, Mapping) else []


_TRANSPORTS = {"stdio": "command", "http": "url", "streamable-http": "url"}


def claude_code_servers(value: Any, warnings: list[str], at: str = "") -> Any:
    """Claude Code's `mcpServers` as an `mcp:` block: a mapping of servers, or a list of
    such mappings (`type: stdio|http` dropped once it agrees); a server named only
    (configured in Claude Code, not here) is left out with a warning."""
    items = value if isinstance(value, list) else [value]
    out: dict[Any, Any] = {}
    for item in items:
        if isinstance(item, str):
            warnings.append(f"{at}mcpServers: {item!r} is a server configured in Claude Code, "
                            "not here: name it under `mcp:` with its command or url (the "
                            "agent runs without it)")
            continue
        if not isinstance(item, Mapping):
            return value  # validation says what is wrong with it
        for name, given in item.items():
            spec = given
            if isinstance(given, Mapping) and "type" in given:
                kind = given["type"]
                if _TRANSPORTS.get(str(kind)) in given:
                    spec = {k: v for k, v in given.items() if k != "type"}
                else:
                    warnings.append(f"{at}mcpServers: {name!r} has type {kind!r}: hivemind "
                                    "runs stdio (command) and streamable HTTP (url) servers "
                                    "(the agent runs without it)")
                    continue
            out[name] = spec
    return out


def _no_such_tool_denied(names: Iterable[Any]) -> None:
    """Raise ToolFieldError if `disallowedTools` names a tool nobody has: a misspelt
    name there would take nothing away."""
    every = [*TOOL_NAMES, *CLAUDE_CODE_TOOLS]
    for name in names:
        base = m.group(1) if isinstance(name, str) and (m := _PATTERN.match(name)) else name
        if isinstance(name, str) and name.startswith("mcp__"):
            if name.count("__") > 1:
                raise ToolFieldError("disallowedTools", (
                    f"disallowedTools: {name}: one tool of an MCP server cannot be denied "
                    "here; list the ones it may use in its `tools:` under `mcp:` (this ROM "
                    "is not used until it is fixed)"))
            continue
        if base in every:
            continue
        close = difflib.get_close_matches(str(name), every, 1, 0.6)
        hint = f" (did you mean `{close[0]}`?)" if close else ""
        raise ToolFieldError("disallowedTools", (
            f"disallowedTools: no tool named {name!r}{hint}; a misspelt name would take "
            "nothing away, so this ROM is not used until it is fixed"))
