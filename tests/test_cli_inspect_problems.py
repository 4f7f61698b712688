"""`hivemind inspect AGENT` names that agent's ROM problems, and no other agent's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hivemind.hive.layout import Hive
from tests.helpers import write_agent

ROOT = Path(__file__).resolve().parent.parent


def inspect(hive: Hive, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "hivemind", "inspect", *args, "--hive", str(hive.root)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120,
        check=False,
    )


def two_agents(hive: Hive) -> None:
    write_agent(hive, "worker")
    # A Claude Code agent file: Bash has no hive counterpart, a problem of this ROM only.
    write_agent(hive, "reviewer", front="description: Reviews code\ntools: Read, Bash\n")


def test_inspecting_one_agent_says_nothing_of_another_agents_rom(hive: Hive) -> None:
    two_agents(hive)
    for args in (("worker",), ("worker", "--request")):
        done = inspect(hive, *args)
        assert done.returncode == 0, done.stderr
        assert "reviewer/ROM.md" not in done.stdout + done.stderr, args
        assert "Bash" not in done.stderr, args


def test_inspecting_an_agent_names_its_own_rom_problems(hive: Hive) -> None:
    two_agents(hive)
    report = inspect(hive, "reviewer")
    assert report.returncode == 0, report.stderr
    assert "agents/reviewer/ROM.md: line" in report.stdout
    assert "Bash left out" in report.stdout
    request = inspect(hive, "reviewer", "--request")
    assert request.returncode == 0, request.stderr
    assert "Bash left out" in request.stderr  # stdout is the request as sent
    assert "Bash left out" not in request.stdout
    as_json = json.loads(inspect(hive, "reviewer", "--request", "--json").stdout)
    assert any("Bash left out" in p for p in as_json["problems"])
