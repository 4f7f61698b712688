"""`hivemind inspect AGENT`: kept and dropped blocks, why, tokens per type."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hivemind.cli import inspect_cmd
from hivemind.hive.layout import Hive
from hivemind.ltm.store import LongTermMemory


@pytest.fixture
def app() -> typer.Typer:
    """A `hivemind` app with the inspect command (a group, as with every command loaded)."""
    cli = typer.Typer(add_completion=False)

    @cli.callback()
    def root() -> None:
        """hivemind"""

    inspect_cmd.register(cli)
    return cli


@pytest.fixture
def example(hive: Hive) -> Hive:
    hive.rom_path("lead").parent.mkdir(parents=True)
    hive.rom_path("lead").write_text(
        "---\nrole: lead\nmax_context_tokens: 20000\n---\n# lead\nSplit work, delegate it.\n"
    )
    (hive.knowledge_dir / "delegation.md").write_text("# Delegation rules\nOne owner per step.\n")
    (hive.knowledge_dir / "deep").mkdir()
    (hive.knowledge_dir / "deep/untitled.md").write_text("no heading here\n")
    (hive.knowledge_dir / ".draft.md").write_text("# ignored editor temp\n")
    (hive.tasks_dir / "notes.md").write_text(
        "---\nid: notes-0-2\ntitle: Write the release notes\n---\nCollect the changes.\n"
    )
    (hive.tasks_dir / "big.md").write_text("# A huge task\n" + "word " * 30_000)
    return hive


def run(app: typer.Typer, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["inspect", *args])
    return result.exit_code, result.output


def test_json_report_lists_every_block_kept_or_dropped(app: typer.Typer, example: Hive) -> None:
    code, out = run(app, "lead", "--hive", str(example.root), "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report["agent"] == "lead"
    assert report["max_context_tokens"] == 20_000  # from the ROM's front matter
    assert report["budget"] < 20_000 - 4_096  # less the output reserve and the tools
    rows = {r["id"]: r for r in report["blocks"]}
    assert set(rows) == {
        "rom:lead", "knowledge/delegation.md", "knowledge/deep/untitled.md",
        "task:notes-0-2", "task:big", "status:hive",
    }
    assert rows["rom:lead"]["kept"] and rows["rom:lead"]["priority"] == "critical"
    assert rows["task:notes-0-2"]["kept"] and rows["task:notes-0-2"]["priority"] == "high"
    assert rows["knowledge/delegation.md"]["priority"] == "medium"
    assert rows["task:big"]["kept"] and rows["task:big"]["reason"] == "compressed"
    assert report["used"] <= report["budget"]
    assert sum(report["tokens_by_type"].values()) + 2 == report["used"]


def test_a_small_budget_drops_blocks_and_says_why(app: typer.Typer, example: Hive) -> None:
    code, out = run(app, "lead", "--hive", str(example.root), "--budget", "600", "--json")
    assert code == 0, out
    rows = {r["id"]: r for r in json.loads(out)["blocks"]}
    assert rows["rom:lead"]["kept"]
    dropped = [r for r in rows.values() if not r["kept"]]
    assert dropped
    assert all(r["reason"].startswith("over budget at ") for r in dropped)
    assert rows["task:big"]["kept"] is False
    assert "HIGH" in rows["task:big"]["reason"] and "80 % of 600" in rows["task:big"]["reason"]


def test_the_table_shows_kept_and_dropped_rows(app: typer.Typer, example: Hive) -> None:
    code, out = run(app, "lead", "--hive", str(example.root), "--budget", "600")
    assert code == 0, out
    assert "rom:lead" in out
    assert "kept" in out and "dropped" in out
    assert "tokens per type:" in out
    assert "budget of 600 tokens" in out


def test_inspect_changes_nothing_on_disk(app: typer.Typer, example: Hive) -> None:
    before = sorted(str(p) for p in example.root.rglob("*"))
    code, out = run(app, "lead", "--hive", str(example.root), "--json")
    assert code == 0, out
    after = sorted(str(p) for p in example.root.rglob("*"))
    assert before == after
    assert (example.tasks_dir / "notes.md").exists()


def memory_rows(hive: Hive) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(hive.memory_db)) as db:
        return db.execute("SELECT * FROM memories ORDER BY id").fetchall()


def test_the_memories_the_agent_would_get_are_shown_and_left_untouched(
    app: typer.Typer, example: Hive
) -> None:
    """Inspect opened no long-term memory: the memories a cycle puts into the context
    were missing from what it showed. It reads them now, and records no use of them."""
    (example.tasks_dir / "notes.md").unlink()
    held = example.active_dir_for("lead")
    held.mkdir(parents=True)
    (held / "notes.md").write_text(  # claimed: its text is what memories are found for
        "---\nid: notes-0-2\ntitle: Write the release notes\nproject: apollo\n---\n"
        "Collect the changes for the release notes.\n"
    )
    with LongTermMemory(example) as ltm:
        kept = ltm.remember("Release notes list every change, newest first.",
                           agent="human", scope="project", project="apollo", importance=0.9)
    rows_before = memory_rows(example)
    before = sorted(str(p) for p in example.root.rglob("*"))

    code, out = run(app, "lead", "--hive", str(example.root), "--json")

    assert code == 0, out
    ids = [b["id"] for b in json.loads(out)["blocks"] if b["kept"]]
    assert f"memory:{kept.id}" in ids
    assert sorted(str(p) for p in example.root.rglob("*")) == before
    assert memory_rows(example) == rows_before  # no access recorded


def test_unknown_agent_is_one_red_line_listing_the_agents(
    app: typer.Typer, example: Hive
) -> None:
    code, out = run(app, "ghost", "--hive", str(example.root))
    assert code == 1
    assert "no agent named 'ghost'" in out
    assert "agents: lead" in out
    assert "Traceback" not in out


def test_a_rom_without_front_matter_gets_the_default_budget(app: typer.Typer, hive: Hive) -> None:
    hive.rom_path("solo").parent.mkdir(parents=True)
    hive.rom_path("solo").write_text("Just instructions.\n")
    code, out = run(app, "solo", "--hive", str(hive.root), "--json")
    assert code == 0, out
    assert json.loads(out)["max_context_tokens"] == 100_000


def test_the_help_explains_the_command(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["inspect", "--help"])
    assert result.exit_code == 0
    assert "kept or dropped" in result.output
    assert "--budget" in result.output and "--json" in result.output


def test_the_repository_example_hive_inspects_cleanly(app: typer.Typer) -> None:
    repo = Path(__file__).resolve().parents[1]
    code, out = run(app, "lead", "--hive", str(repo), "--json")
    assert code == 0, out
    rows = {r["id"]: r for r in json.loads(out)["blocks"]}
    assert rows["rom:lead"]["kept"]
    assert rows["knowledge/delegation.md"]["kept"]
    assert rows["task:release-notes-0-2"]["kept"]


def test_a_rom_over_the_budget_is_reported_not_raised(app: typer.Typer, example: Hive) -> None:
    code, out = run(app, "lead", "--hive", str(example.root), "--budget", "10")
    assert code == 2
    assert "CRITICAL blocks need" in out and "rom:lead" in out
    assert "Traceback" not in out
