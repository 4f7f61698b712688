"""Claude Code subagent files are ROMs as they are, and a ROM's typos are told, never
silently granting every tool."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hivemind.agent.prompt import TEAM, team_text
from hivemind.agent.services import HiveServices
from hivemind.cli import hive_cmds
from hivemind.cli.hive_status import hive_status
from hivemind.errors import ConfigError
from hivemind.hive.layout import Hive
from hivemind.hive.models import Task
from hivemind.hive.rom import RomRegistry
from hivemind.hive.tasks.routing import route_task
from hivemind.llm.offline import OfflineProvider
from hivemind.settings import TOOL_NAMES, AgentSettings

# Written as the public examples of `.claude/agents/*.md` are.
REVIEWER = """\
---
name: code-reviewer
description: Expert code review specialist. Proactively reviews code for quality, security, \
and maintainability. Use immediately after writing or modifying code.
tools: Read, Grep, Glob, Bash
model: inherit
color: blue
---

You are a senior code reviewer ensuring high standards of code quality and security.
"""
DEBUGGER = """\
---
name: debugger
description: Debugging specialist for errors, test failures, and unexpected behavior.
tools:
  - Read
  - Edit
  - MultiEdit
  - WebFetch
---

You are an expert debugger specializing in root cause analysis.
"""
COORDINATION = ["complete_task", "fail_task", "send_message", "wait_for"]


def put(hive: Hive, name: str, text: str) -> Path:
    path = hive.rom_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def edit(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()  # another, settled mtime: the registry reads the file again
    os.utime(path, (st.st_atime - 5, st.st_mtime - 5))


def test_a_claude_code_file_is_a_rom_with_its_tools_mapped(hive: Hive) -> None:
    put(hive, "code-reviewer", REVIEWER)
    config = RomRegistry(hive, AgentSettings()).load("code-reviewer")
    assert config.tools == ["read_file", "search_files", "list_files", *COORDINATION]
    assert config.description.startswith("Expert code review specialist.")
    assert config.summary == "Expert code review specialist"
    assert config.model == AgentSettings().model  # `inherit`: the hive's model
    assert config.extra == {"name": "code-reviewer", "color": "blue"}


@pytest.mark.parametrize("tools", [
    "Read, Edit", "[Read, Edit]", "\n  - Read\n  - MultiEdit\n  - Edit", "read_file, Edit",
    "read_file, edit_file",
], ids=["comma-string", "flow-list", "block-list", "hive-and-claude-names", "hive-names"])
def test_claude_code_tools_come_in_every_form(hive: Hive, tools: str) -> None:
    put(hive, "dev", f"---\ndescription: Writes code.\ntools: {tools}\n---\nWrite code.\n")
    config = RomRegistry(hive, AgentSettings()).load("dev")
    assert config.tools == ["read_file", "edit_file", *COORDINATION]


def test_a_claude_code_agent_always_gets_the_tools_that_end_a_task(hive: Hive) -> None:
    put(hive, "reader", "---\nname: reader\ndescription: Reads.\ntools: Read\n---\nRead.\n")
    config = RomRegistry(hive, AgentSettings()).load("reader")
    assert config.finishes_tasks
    assert config.tools is not None and set(COORDINATION) <= set(config.tools)


def test_a_hive_rom_without_them_still_gets_no_tasks(hive: Hive) -> None:
    put(hive, "talker", "---\ntools: [send_message]\n---\nTalk.\n")
    config = RomRegistry(hive, AgentSettings()).load("talker")
    assert config.tools == ["send_message"] and not config.finishes_tasks


def test_disallowed_tools_are_taken_away(hive: Hive) -> None:
    put(hive, "safe", "---\ndescription: Looks.\ndisallowedTools: Write, Edit\n---\nLook.\n")
    config = RomRegistry(hive, AgentSettings()).load("safe")
    assert config.tools is not None
    assert "write_file" not in config.tools and "edit_file" not in config.tools
    assert "read_file" in config.tools and "complete_task" in config.tools


def test_status_shows_claude_code_tools_left_out_and_the_agent_runs(hive: Hive) -> None:
    put(hive, "code-reviewer", REVIEWER)
    put(hive, "debugger", DEBUGGER)
    agents = {a.name: a for a in hive_status(hive).agents}
    assert agents["code-reviewer"].ok and agents["debugger"].ok
    assert agents["code-reviewer"].warnings == [
        "line 4: tools: Bash left out: no hive tool does that (the agent runs without it)"]
    assert "WebFetch left out" in agents["debugger"].warnings[0]
    assert agents["debugger"].role == "Debugging specialist for errors, test failures, " \
        "and unexpected behavior"


def test_tools_left_out_are_said_as_one_or_several(hive: Hive) -> None:
    put(hive, "fetcher", "---\ndescription: Fetches.\ntools: Read, Bash, WebFetch\n---\nGo.\n")
    [warning] = hive_status(hive).agents[0].warnings
    assert warning.endswith("Bash, WebFetch left out: no hive tool does that (the agent "
                            "runs without them)")


def test_a_name_other_than_the_folders_is_a_problem_in_status(hive: Hive) -> None:
    put(hive, "reviewer", REVIEWER)
    (status,) = hive_status(hive).agents
    assert status.ok and status.name == "reviewer"
    assert any("name 'code-reviewer' is not the folder's: this agent is 'reviewer'" in w
               for w in status.warnings)


@pytest.mark.parametrize(("field", "hint"), [
    ("modle: claude-haiku-5-5", "did you mean `model`?"),
    ("skils: [python]", "did you mean `skills`?"),
    ("colour: red", "did you mean `color`?"),
    ("favourite_food: soup", ""),
], ids=["modle", "skils", "colour", "nothing-close"])
def test_an_unknown_field_is_a_problem_with_the_closest_name(
    hive: Hive, field: str, hint: str
) -> None:
    put(hive, "a", f"---\nrole: r\n{field}\n---\nhi\n")
    (status,) = hive_status(hive).agents
    key = field.split(":", maxsplit=1)[0]
    assert status.ok
    assert status.warnings == [f"line 3: unknown field {key!r} is ignored"
                               + (f" ({hint})" if hint else "")]


def test_status_prints_each_problem_once_naming_its_rom(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    put(hive, "a", "---\nrole: r\nmodle: claude-haiku-5-5\n---\nhi\n")
    app = typer.Typer()
    hive_cmds.register(app)
    result = CliRunner().invoke(app, ["status", str(hive.root)])
    assert result.exit_code == 0, result.output
    said = result.output + caplog.text
    assert said.count("unknown field 'modle'") == 1
    assert ("agents/a/ROM.md: line 3: unknown field 'modle' is ignored (did you mean "
            "`model`?)") in " ".join(result.stdout.split())


@pytest.mark.parametrize("field", [
    "tool: [read_file, complete_task]", "tols: [read_file]", "Tools: Read",
    "allowed-tools: Read", "toolz: [read_file]",
], ids=["tool", "tols", "Tools", "allowed-tools", "toolz"])
def test_a_misspelt_tools_never_grants_every_tool(hive: Hive, field: str) -> None:
    """First start: no last good config, so the agent does not run and status says why."""
    put(hive, "a", f"---\nrole: r\n{field}\n---\nhi\n")
    with pytest.raises(ConfigError, match=r"did you mean `tools`\?"):
        RomRegistry(hive, AgentSettings()).load("a")
    (status,) = hive_status(hive).agents
    assert not status.ok and not status.last_good
    key = field.split(":", maxsplit=1)[0]
    assert status.error == (
        f"agents/a/ROM.md: line 3: unknown field {key!r}: did you mean `tools`? A misspelt "
        "`tools` would grant every tool, so this ROM is not used until it is fixed")


def test_a_misspelt_tools_is_said_with_the_roms_other_slips(hive: Hive) -> None:
    """The ROM is refused: each of its slips is said at once, not one per edit."""
    put(hive, "a", "---\nrole: r\nmodle: claude-haiku-5-5\ntool: [read_file]\n---\nhi\n")
    (status,) = hive_status(hive).agents
    assert not status.ok
    assert status.error is not None
    assert status.error.startswith("agents/a/ROM.md: line 4: unknown field 'tool': did you")
    assert status.error.endswith(
        "; line 3: unknown field 'modle' is ignored (did you mean `model`?)")


def test_a_misspelt_deny_list_is_invalid_too(hive: Hive) -> None:
    put(hive, "a", "---\ndescription: x\ndisallowed_tools: Write\n---\nhi\n")
    with pytest.raises(ConfigError, match=r"did you mean `disallowedTools`\?"):
        RomRegistry(hive, AgentSettings()).load("a")


def test_a_misspelt_name_in_the_deny_list_is_invalid(hive: Hive) -> None:
    put(hive, "a", "---\ndescription: x\ndisallowedTools: Wrte, Edit\n---\nhi\n")
    with pytest.raises(ConfigError, match=r"no tool named 'Wrte' \(did you mean `Write`\?\)"):
        RomRegistry(hive, AgentSettings()).load("a")


def test_an_empty_allow_list_less_a_deny_list_is_still_empty(hive: Hive) -> None:
    put(hive, "a", "---\ndescription: x\ntools: []\ndisallowedTools: Write\n---\nhi\n")
    assert RomRegistry(hive, AgentSettings()).load("a").tools == COORDINATION


def test_a_misspelt_tools_edit_keeps_the_last_good_allow_list(hive: Hive) -> None:
    path = put(hive, "a", "---\ntools: [read_file, complete_task]\n---\nhi\n")
    roms = RomRegistry(hive, AgentSettings())
    assert roms.load("a").tools == ["read_file", "complete_task"]
    edit(path, "---\ntool: [read_file, complete_task]\n---\nhi\n")
    assert roms.load("a").tools == ["read_file", "complete_task"]  # not every tool
    assert "did you mean `tools`?" in (roms.error("a") or "")


def test_a_misspelt_hive_tool_name_is_still_an_error(hive: Hive) -> None:
    put(hive, "a", "---\ndescription: x\ntools: read_fil, Read\n---\nhi\n")
    with pytest.raises(ConfigError, match="no tool named read_fil"):
        RomRegistry(hive, AgentSettings()).load("a")


def test_an_unknown_claude_code_tool_is_left_out_not_an_error(hive: Hive) -> None:
    put(hive, "a", "---\ndescription: x\ntools: Read, NewTool, mcp__github__search, "
        "Bash(git diff:*)\n---\nhi\n")
    roms = RomRegistry(hive, AgentSettings())
    assert roms.load("a").tools == ["read_file", *COORDINATION]
    assert "NewTool, Bash(git diff:*) left out" in roms.warnings("a")[0]
    assert "mcp__github__search left out: this ROM names no such MCP server" in (
        roms.warnings("a")[1])


def test_tasks_are_routed_by_description(hive: Hive) -> None:
    put(hive, "code-reviewer", REVIEWER)
    put(hive, "debugger", DEBUGGER)
    agents = list(RomRegistry(hive, AgentSettings()).configs().values())

    def to(title: str) -> str | None:
        return route_task(Task(id="t", title=title), agents)

    assert to("Review the login code for security issues") == "code-reviewer"
    assert to("Find the cause of the test failures in the parser") == "debugger"


def test_every_hive_tool_is_kept_as_named(hive: Hive) -> None:
    put(hive, "a", f"---\ntools: {', '.join(TOOL_NAMES)}\n---\nhi\n")
    assert RomRegistry(hive, AgentSettings()).load("a").tools == list(TOOL_NAMES)


def test_the_team_list_says_what_a_claude_code_agent_does(hive: Hive) -> None:
    put(hive, "code-reviewer", REVIEWER)
    put(hive, "lead", "---\nrole: Plans the work\n---\nLead.\n")
    team = HiveServices.open(hive, OfflineProvider()).board_figures()[TEAM]
    assert "code-reviewer (Expert code review specialist)" in team_text("lead", team)


def test_a_descriptions_examples_do_not_route(hive: Hive) -> None:
    """Claude Code's generated descriptions carry <example> dialogues: their words would
    make that agent match almost any task."""
    put(hive, "debugger", DEBUGGER)
    put(hive, "helper", "---\ndescription: \"Use this agent to review pull requests. "
        "Examples: <example>user: write the release notes and deploy the docs site. "
        "assistant: I will use the helper agent.</example>\"\n---\nhi\n")
    agents = list(RomRegistry(hive, AgentSettings()).configs().values())
    task = Task(id="t", title="Write the release notes and deploy the docs site")
    assert route_task(task, agents, {"helper": 1}) == "debugger"  # the least loaded
