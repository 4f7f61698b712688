"""`hivemind status`: each agent's tokens and estimated cost today (UTC), from the tail
of its audit log."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from tests.helpers import write_agent


def test_status_shows_each_agents_tokens_and_cost_today(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    now = datetime.now(UTC)
    hive.audit_dir.mkdir(parents=True, exist_ok=True)
    records = [
        {"event": "cycle", "at": (now - timedelta(days=2)).isoformat(), "provider": "anthropic",
         "usage": {"input_tokens": 9000}, "cost": 9.0},
        {"event": "cycle", "at": now.isoformat(), "provider": "anthropic",
         "usage": {"input_tokens": 1000, "output_tokens": 234}, "cost": 0.25},
        {"event": "cycle_start", "at": now.isoformat()},
    ]
    hive.audit_path("ann").write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(app, ["status", str(hive.root)], terminal_width=200)
    assert result.exit_code == 0, result.output
    ann = next(x for x in result.output.splitlines() if x.startswith(" ann "))
    bob = next(x for x in result.output.splitlines() if x.startswith(" bob "))
    assert re.split(r"\s{2,}", ann.strip())[-3:-1] == ["1,234", "$0.2500"]
    assert re.split(r"\s{2,}", bob.strip())[-3:-1] == ["0", "-"]
    data = json.loads(CliRunner().invoke(app, ["status", str(hive.root), "--json"]).stdout)
    assert data["spend_today"]["ann"] == {"cycles": 1, "tokens": 1234, "cost_usd": 0.25,
                                          "unpriced": False}


def test_status_keeps_each_agent_on_one_line_in_80_columns(hive: Hive) -> None:
    write_agent(hive, "researcher")  # role: "researcher of the test hive"
    write_agent(hive, "lead", front="model: claude-sonnet-5-5\n")
    result = CliRunner().invoke(app, ["status", str(hive.root)], terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    [header] = [x for x in lines if x.split()[:1] == ["agent"]]
    assert header.split() == ["agent", "config", "model", "active", "unread", "tokens",
                              "cost", "role"]
    [row] = [x for x in lines if x.startswith(" researcher ")]
    assert len(row.rstrip()) <= 80 and row.rstrip().endswith("…")  # the role, cut
    at = lines.index(row)
    after = lines[at + 1]
    assert not after.strip() or not after.startswith("   ")  # no line wrapped from it
