"""Nothing an MCP server block names runs before the user trusts it: `hivemind trust`
shows what it would trust and records each server; a new or changed block needs
trusting again; untrusted, the server is a problem of its ROM in `status`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.hive.mcptrust import ServerTrust, server_trust, trusted_servers
from hivemind.hive.rom import RomRegistry
from hivemind.settings import AgentSettings
from tests.helpers import write_agent

NOTES = ("mcp:\n  notes:\n    command: python3\n    args: [tools/notes_server.py]\n"
         "    env: {NOTES_DIR: knowledge, TOKEN: '${GITHUB_TOKEN}'}\n")


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def states(hive: Hive, agent: str = "a") -> dict[str, ServerTrust]:
    cfg = RomRegistry(hive, AgentSettings()).load(agent)
    return server_trust(hive, agent, cfg.mcp)


def test_trust_shows_what_runs_and_its_environment_names(hive: Hive) -> None:
    write_agent(hive, "a", NOTES)
    shown = cli("trust", str(hive.root), "--show")
    assert shown.exit_code == 0, shown.output
    line = " ".join(shown.output.split())
    assert "agents/a/ROM.md: MCP server `notes` (stdio, not trusted)" in line
    assert "python3 tools/notes_server.py" in line
    assert "NOTES_DIR=knowledge, TOKEN from ${GITHUB_TOKEN}" in line
    assert states(hive) == {"notes": ServerTrust.UNTRUSTED}


def test_a_hive_without_hive_toml_trusts_its_servers(hive: Hive) -> None:
    write_agent(hive, "a", NOTES)
    done = cli("trust", str(hive.root))
    assert done.exit_code == 0, done.output
    assert "MCP server `notes` (stdio, trusted)" in " ".join(done.output.split())
    assert states(hive) == {"notes": ServerTrust.TRUSTED}
    facts = json.loads(cli("trust", str(hive.root), "--show", "--json").output)
    assert [(s["agent"], s["server"], s["state"]) for s in facts["mcp"]] == [
        ("a", "notes", "trusted")]


def test_a_changed_block_needs_trusting_again(hive: Hive) -> None:
    rom = write_agent(hive, "a", NOTES)
    assert cli("trust", str(hive.root)).exit_code == 0
    rom.write_text(rom.read_text().replace("notes_server.py", "other.py"))
    assert states(hive) == {"notes": ServerTrust.CHANGED}


def test_a_new_server_needs_trusting_and_the_trusted_one_still_runs(hive: Hive) -> None:
    rom = write_agent(hive, "a", NOTES)
    assert cli("trust", str(hive.root)).exit_code == 0
    rom.write_text(rom.read_text().replace(
        "mcp:\n", "mcp:\n  web: {url: 'http://127.0.0.1:9/mcp'}\n"))
    cfg = RomRegistry(hive, AgentSettings()).load("a")
    assert states(hive) == {"web": ServerTrust.UNTRUSTED, "notes": ServerTrust.TRUSTED}
    assert list(trusted_servers(hive, "a", cfg.mcp)) == ["notes"]


def test_the_same_block_in_another_agent_is_not_trusted_by_the_first(hive: Hive) -> None:
    write_agent(hive, "a", NOTES)
    assert cli("trust", str(hive.root)).exit_code == 0
    write_agent(hive, "b", NOTES)
    assert states(hive, "b") == {"notes": ServerTrust.UNTRUSTED}


def test_revoking_untrusts_the_servers(hive: Hive) -> None:
    write_agent(hive, "a", NOTES)
    assert cli("trust", str(hive.root)).exit_code == 0
    assert cli("trust", str(hive.root), "--revoke").exit_code == 0
    assert states(hive) == {"notes": ServerTrust.UNTRUSTED}


def test_untrusted_servers_are_a_rom_problem_in_status(hive: Hive) -> None:
    write_agent(hive, "a", NOTES)
    out = cli("status", str(hive.root), "--json")
    assert out.exit_code == 0, out.output
    [agent] = json.loads(out.output)["agents"]
    assert agent["ok"]  # it runs, without those tools
    [warning] = agent["warnings"]
    assert warning.startswith("MCP server `notes` not trusted: it does not start")
    assert "run `hivemind trust`" in warning


def test_a_trusted_server_missing_its_variable_is_told(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    write_agent(hive, "a", NOTES)
    assert cli("trust", str(hive.root)).exit_code == 0
    roms = RomRegistry(hive, AgentSettings())
    roms.load("a")
    assert roms.warnings("a") == [
        "MCP server `notes`: ${GITHUB_TOKEN} not set in your environment (passed empty)"]


def test_nothing_to_trust_is_said(tmp_path: Path) -> None:
    hive = Hive(tmp_path).ensure()
    write_agent(hive, "a")
    out = cli("trust", str(hive.root))
    assert out.exit_code == 1
    assert "has no hive.toml and its ROMs name no MCP server" in " ".join(out.output.split())
