"""`hivemind trust --revoke` says what it revoked: hive.toml's trust and the MCP
servers' are one record, so a hive with servers and no hive.toml is revoked too."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from tests.helpers import write_agent

SERVER = "mcp:\n  notes:\n    command: python3\n    args: [tools/notes.py]\n"


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_revoking_a_hive_with_mcp_servers_and_no_hive_toml_says_what_went(
    tmp_path: Path,
) -> None:
    hive = Hive(tmp_path / "h").ensure()
    write_agent(hive, "lead", front=SERVER)
    root = str(hive.root)
    cli("trust", root)
    assert "(stdio, trusted)" in cli("trust", root, "--show")

    said = cli("trust", root, "--revoke")

    # It said "hive.toml: no longer trusted", of a file the hive does not have.
    assert said.startswith("this hive is no longer trusted")
    assert "MCP servers do not start" in said
    assert "(stdio, not trusted)" in cli("trust", root, "--show")
    assert "this hive was not trusted: nothing to revoke" in cli("trust", root, "--revoke")
