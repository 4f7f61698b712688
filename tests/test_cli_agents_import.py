"""`hivemind agents import DIR`: Claude Code agent files become the hive's agents, and
run on a first start."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from hivemind.cli import agents_cmd
from hivemind.hive.layout import Hive
from tests.helpers import run_until_idle, write_task
from tests.test_hive_claude_code_roms import DEBUGGER, REVIEWER


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    agents_cmd.register(app)
    return app


@pytest.fixture
def claude_agents(tmp_path: Path) -> Path:
    folder = tmp_path / "project" / ".claude" / "agents"
    folder.mkdir(parents=True)
    (folder / "code-reviewer.md").write_text(REVIEWER)
    (folder / "debug.md").write_text(DEBUGGER)  # `name: debugger` names the agent
    return folder


def run(app: typer.Typer, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def test_import_copies_each_file_as_an_agents_rom(
    cli: typer.Typer, hive: Hive, claude_agents: Path
) -> None:
    result = run(cli, "agents", "import", str(claude_agents), "--hive", str(hive.root))
    assert hive.rom_path("code-reviewer").read_text() == REVIEWER  # unchanged
    assert hive.rom_path("debugger").read_text() == DEBUGGER
    lines = result.output.strip().splitlines()
    assert len(lines) == 2
    assert "code-reviewer.md → agents/code-reviewer/ROM.md" in lines[0]
    assert "Bash left out" in lines[0]
    assert "debug.md → agents/debugger/ROM.md" in lines[1]


def test_import_of_a_project_takes_its_claude_agents(
    cli: typer.Typer, hive: Hive, claude_agents: Path
) -> None:
    project = claude_agents.parent.parent
    run(cli, "agents", "import", str(project), "--hive", str(hive.root))
    assert hive.agent_names() == ["code-reviewer", "debugger"]


def test_import_never_overwrites_nor_copies_an_invalid_rom(
    cli: typer.Typer, hive: Hive, claude_agents: Path
) -> None:
    mine = "---\nrole: mine\n---\nMy own reviewer.\n"
    hive.rom_path("code-reviewer").parent.mkdir(parents=True)
    hive.rom_path("code-reviewer").write_text(mine)
    (claude_agents / "typo.md").write_text("---\nname: typo\ntool: Read\n---\nhi\n")

    result = run(cli, "agents", "import", str(claude_agents), "--hive", str(hive.root), code=1)

    assert hive.rom_path("code-reviewer").read_text() == mine
    assert hive.rom_path("debugger").is_file()
    assert not hive.agent_dir("typo").exists()
    out = " ".join(result.output.split())
    assert "not imported" in out and "agents/code-reviewer/ROM.md exists" in out
    assert "typo.md: not a valid ROM: line 3: unknown field 'tool': did you mean `tools`?" in out


def test_importing_again_keeps_the_agents_made_and_succeeds(
    cli: typer.Typer, hive: Hive, claude_agents: Path
) -> None:
    run(cli, "agents", "import", str(claude_agents), "--hive", str(hive.root))
    (claude_agents / "writer.md").write_text("---\ndescription: Writes.\n---\nWrite.\n")

    again = run(cli, "agents", "import", str(claude_agents), "--hive", str(hive.root))

    out = " ".join(again.output.split())
    assert "kept" in out and "agents/code-reviewer/ROM.md exists (left as it is)" in out
    assert "not imported" not in out
    assert "imported" in out and hive.rom_path("writer").is_file()


def test_import_of_a_missing_folder_is_one_line(cli: typer.Typer, hive: Hive,
                                                tmp_path: Path) -> None:
    result = run(cli, "agents", "import", str(tmp_path / "nope"), "--hive", str(hive.root),
                 code=1)
    assert result.output.strip().startswith("error: ") and "no such folder" in result.output


def test_a_first_start_with_claude_code_roms_finishes_the_task(
    cli: typer.Typer, hive: Hive, claude_agents: Path
) -> None:
    """Routed by description to the reviewer, whose `tools: Read, Grep, Glob, Bash`
    names no tool that ends a task: it is given them, and ends it."""
    run(cli, "agents", "import", str(claude_agents), "--hive", str(hive.root))
    write_task(hive, "review", body="Review the login code for security issues.")

    run_until_idle(hive)

    done = hive.done_dir / "review.md"
    assert done.is_file() and "agent: code-reviewer" in done.read_text()


def test_a_readme_beside_the_agent_files_is_skipped_not_made_an_agent(
    cli: typer.Typer, hive: Hive, claude_agents: Path
) -> None:
    (claude_agents / "README.md").write_text("# Our agents\n\nThe reviewer reviews.\n")

    result = run(cli, "agents", "import", str(claude_agents), "--hive", str(hive.root))

    assert hive.agent_names() == ["code-reviewer", "debugger"]
    out = " ".join(result.output.split())
    assert "skipped" in out and "README.md: not an agent file: no front matter" in out
