"""`hivemind status`: each agent's tokens and estimated cost today (UTC), from the tail
of its audit log."""

from __future__ import annotations

import json
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
    ann = next(x for x in result.output.splitlines() if x.startswith("│ ann "))
    bob = next(x for x in result.output.splitlines() if x.startswith("│ bob "))
    assert [c.strip() for c in ann.split("│")][-3:-1] == ["1,234", "$0.2500"]
    assert [c.strip() for c in bob.split("│")][-3:-1] == ["0", "-"]
    data = json.loads(CliRunner().invoke(app, ["status", str(hive.root), "--json"]).stdout)
    assert data["spend_today"]["ann"] == {"cycles": 1, "tokens": 1234, "cost_usd": 0.25,
                                          "unpriced": False}
