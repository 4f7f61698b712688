"""`hivemind status` of a hive no daemon has run in yet: it says what to do."""

from __future__ import annotations

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from tests.helpers import write_agent


def test_status_before_any_run_says_how_to_start_the_daemon(hive: Hive) -> None:
    write_agent(hive, "worker")
    result = CliRunner().invoke(app, ["status", "--hive", str(hive.root)], terminal_width=200)
    assert result.exit_code == 0, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == ("daemon: none has run here yet (no .hivemind/status.json); "
                    "`hivemind run` starts one")
