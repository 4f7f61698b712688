"""`hivemind memory list`, and the importance `memory search` shows: the stored one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.ltm.store import LongTermMemory

runner = CliRunner()
T0 = datetime(2024, 3, 1, tzinfo=UTC)


def run(hive: Hive, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memory", *args, "--hive", str(hive.root)], terminal_width=200)
    return result.exit_code, result.stdout, result.stderr


def fill(hive: Hive) -> dict[str, str]:
    """Four memories a minute apart, oldest first; returns name → id."""
    with LongTermMemory(hive) as ltm:
        made = [
            ltm.remember("the staging database moved to eu-west", agent="ann", scope="global",
                         importance=0.4, at=T0),
            ltm.remember("apollo ships on the first Friday of the month", agent="bob",
                         scope="project", project="apollo", at=T0 + timedelta(minutes=1)),
            ltm.remember("zeus logs rotate daily", agent="ann", scope="project",
                         project="zeus", importance=0.8, at=T0 + timedelta(minutes=2)),
            ltm.remember("apollo's release notes live in docs/", agent="ann", scope="project",
                         project="apollo", importance=0.6, at=T0 + timedelta(minutes=3)),
        ]
    return dict(zip(["staging", "ships", "zeus", "notes"], [m.id for m in made], strict=True))


def test_search_shows_the_stored_importance_and_how_it_was_set(hive: Hive) -> None:
    # It showed the normalised score term: `imp 1.00` for a memory stored at 0.40.
    ids = fill(hive)
    code, out, _ = run(hive, "search", "staging database")
    assert code == 0
    assert "0.40 given" in out and "1.00 given" not in out
    code, out, _ = run(hive, "search", "staging database", "--json")
    [hit] = [r for r in json.loads(out) if r["id"] == ids["staging"]]
    assert hit["stored_importance"] == 0.4 and hit["importance_by"] == "given"
    code, out, _ = run(hive, "search", "apollo ships", "--project", "apollo")
    assert "heuristic" in out  # no importance given: the estimate, not yet rated


def test_list_shows_newest_first_with_every_project(hive: Hive) -> None:
    ids = fill(hive)
    code, out, err = run(hive, "list", "--json")
    assert (code, err) == (0, "")
    listed = json.loads(out)
    assert [m["id"] for m in listed] == [ids["notes"], ids["zeus"], ids["ships"], ids["staging"]]
    assert listed[0]["importance"] == 0.6 and listed[0]["importance_by"] == "given"
    code, out, _ = run(hive, "list")
    assert code == 0 and out.index(ids["notes"]) < out.index(ids["staging"])
    assert "0.60 given" in out and "project apollo" in out and "by bob" in out


def test_list_filters_by_project_scope_and_agent_and_counts(hive: Hive) -> None:
    ids = fill(hive)

    def listed(*args: str) -> list[str]:
        code, out, err = run(hive, "list", "--json", *args)
        assert (code, err) == (0, ""), err
        return [m["id"] for m in json.loads(out)]

    assert listed("--project", "apollo") == [ids["notes"], ids["ships"]]
    assert listed("--scope", "global") == [ids["staging"]]
    assert listed("--agent", "bob") == [ids["ships"]]
    assert listed("--agent", "ann", "-n", "2") == [ids["notes"], ids["zeus"]]
    assert listed("--project", "hermes") == []


def test_list_refuses_an_unknown_scope_in_one_line(hive: Hive) -> None:
    code, out, err = run(hive, "list", "--scope", "team")
    assert code != 0 and out == ""
    assert err.strip().splitlines() == [
        "error: --scope must be task, project or global (got 'team')"
    ]


def test_list_on_a_hive_with_no_memories_says_so(hive: Hive) -> None:
    code, out, _ = run(hive, "list")
    assert code == 0 and "no memories yet" in out
    assert not hive.memory_db.exists()  # a look makes no store


def test_list_help_says_what_it_shows(hive: Hive) -> None:
    result = runner.invoke(app, ["memory", "list", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "newest first" in result.stdout and "heuristic" in result.stdout
    assert "--project" in result.stdout and "-n" in result.stdout
