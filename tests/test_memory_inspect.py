"""`hivemind inspect AGENT`: kept and dropped blocks, why, tokens per type."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from hivemind.cli import inspect_cmd
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.ltm.store import LongTermMemory
from tests.helpers import write_agent


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
    assert rows["task:big"]["kept"] and rows["task:big"]["reason"].endswith("; compressed")
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
    # A task longer than the whole budget is shortened to a quarter of it, not dropped:
    # the agent must see what it holds.
    assert rows["task:big"]["kept"] and rows["task:big"]["reason"].endswith("; compressed")
    assert rows["task:big"]["tokens"] < 600 // 4 + 100  # and its envelope


def test_the_table_shows_kept_and_dropped_rows(app: typer.Typer, example: Hive) -> None:
    code, out = run(app, "lead", "--hive", str(example.root), "--budget", "600")
    assert code == 0, out
    assert "rom:lead" in out
    assert "kept" in out and "dropped" in out
    assert "tokens per type (counted, kept blocks):" in out
    assert "budget of 600 tokens" in out


# -- one counting basis per figure (the repository's example hive, copied) -----------


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """The repository's example hive, copied: inspect runs on a copy, never in place."""
    repo = Path(__file__).resolve().parents[1]
    root = tmp_path / "example"
    for folder in ("agents", "knowledge", "tasks"):
        shutil.copytree(repo / folder, root / folder)
    if (repo / "hive.toml").is_file():
        shutil.copy(repo / "hive.toml", root / "hive.toml")
    return root


def report(app: typer.Typer, root: Path, *options: str) -> dict[str, Any]:
    code, out = run(app, "lead", "--hive", str(root), "--json", *options)
    assert code == 0, out
    return dict(json.loads(out))


# 400: only the ROM fits; 700: some blocks of each tier are kept, some dropped.
BUDGETS = [pytest.param("400", id="rom-only"), pytest.param("700", id="mixed")]


@pytest.mark.parametrize("budget", BUDGETS)
def test_a_dropped_block_shows_the_tokens_it_would_count_if_kept(
    app: typer.Typer, example_copy: Path, budget: str
) -> None:
    """Kept rows showed counted tokens and dropped rows the selector's estimates, in one
    column: the same block read 342 dropped and 271 kept."""
    roomy = {r["id"]: r for r in report(app, example_copy)["blocks"]}
    assert all(r["kept"] for r in roomy.values())

    squeezed = report(app, example_copy, "--budget", budget)["blocks"]

    assert any(not r["kept"] for r in squeezed)
    # (In so small a budget the knowledge notes are out of view, the shelf's line in.)
    both = [r for r in squeezed if r["id"] in roomy]
    assert len(both) >= len(squeezed) - 1
    assert {r["id"]: r["tokens"] for r in both} == {r["id"]: roomy[r["id"]]["tokens"] for r in both}


@pytest.mark.parametrize("budget", BUDGETS)
def test_the_numbers_of_a_drop_reason_are_the_estimated_figures(
    app: typer.Typer, example_copy: Path, budget: str
) -> None:
    squeezed = report(app, example_copy, "--budget", budget)
    kept = [r for r in squeezed["blocks"] if r["kept"]]
    dropped = [r for r in squeezed["blocks"] if not r["kept"]]

    assert sum(r["estimated"] for r in kept) == squeezed["estimated_used"]
    already: set[int] = set()
    for row in dropped:
        found = re.fullmatch(rf"over budget at \w+: (\d+) tokens would pass \d+ % of {budget} "
                             r"\((\d+) already used\)", row["reason"])  # fmt: skip
        assert found, row["reason"]
        assert int(found[1]) == row["estimated"]
        already.add(int(found[2]))
    assert max(already) <= squeezed["estimated_used"]
    if budget == "400":  # only the ROM is in before them
        assert [r["id"] for r in kept] == ["rom:lead"]
        assert already == {kept[0]["estimated"]}


@pytest.mark.parametrize("budget", BUDGETS)
def test_the_counted_totals_add_up(app: typer.Typer, example_copy: Path, budget: str) -> None:
    squeezed = report(app, example_copy, "--budget", budget)
    kept = [r for r in squeezed["blocks"] if r["kept"]]
    in_blocks = sum(r["tokens"] for r in kept)
    assert in_blocks == sum(squeezed["tokens_by_type"].values())
    assert in_blocks + squeezed["json_array_tokens"] == squeezed["used"]


def test_the_budget_says_where_it_comes_from(app: typer.Typer, example_copy: Path) -> None:
    roomy = report(app, example_copy)
    parts = roomy["budget_parts"]
    assert parts["max_context_tokens"] == roomy["max_context_tokens"]
    assert (parts["max_context_tokens"] - parts["output_reserve"] - parts["preamble_and_tools"]
            - parts["team"]) == roomy["budget"]  # fmt: skip
    assert report(app, example_copy, "--budget", "1000")["budget_parts"] == {"given": 1000}


def test_the_table_labels_each_figure(app: typer.Typer, example_copy: Path) -> None:
    squeezed = report(app, example_copy, "--budget", "400")
    rom = next(r for r in squeezed["blocks"] if r["id"] == "rom:lead")

    code, out = run(app, "lead", "--hive", str(example_copy), "--budget", "400")

    assert code == 0, out
    text = " ".join(out.split())
    assert " tokens est. kept " in text
    assert f"tokens per type (counted, kept blocks): rom {rom['tokens']:,}" in text
    share = f"{100 * squeezed['used'] / 400:.1f} %"
    assert (f"used {squeezed['used']:,} of a budget of 400 tokens ({share}): {rom['tokens']:,} "
            "in the kept blocks and 2 for the JSON array around them, counted") in text
    assert "budget: 400 tokens, from --budget" in text
    assert "max_context_tokens" not in text  # it was said to be the budget's source
    assert f"'over budget at' reasons count in ({rom['estimated']:,} for the kept blocks)" in text


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


def test_a_dropped_file_is_counted_compressed_as_a_kept_one_is(
    app: typer.Typer, hive: Hive
) -> None:
    """Six copies of one long file in a small budget: each counts the same tokens,
    kept or dropped (dropped ones were counted under the 8,000-token cap)."""
    write_agent(hive, "worker", front="watch: ['workspace/*.txt']\n")
    for i in range(6):
        (hive.workspace_dir / f"big{i}.txt").write_text(("lorem ipsum dolor sit amet " * 12
                                                          + "\n") * 300)
    code, out = run(app, "worker", "--hive", str(hive.root), "--budget", "2000", "--json")
    assert code == 0, out
    rows = [r for r in json.loads(out)["blocks"] if r["type"] == "file"]
    assert any(r["kept"] for r in rows) and any(not r["kept"] for r in rows)
    assert len({r["tokens"] for r in rows}) == 1


def test_a_mail_row_names_its_file(app: typer.Typer, example: Hive) -> None:
    """A mail's entry goes by a short id (`msg:` and 10 hex digits): the report names
    the file it stands for, as a task's does; a note's id is its file already."""
    [path] = PostOffice(example).send(HUMAN, "lead", "Figures", "How many?", id="m1")
    rows = {r["id"]: r for r in json.loads(run(app, "lead", "--hive", str(example.root),
                                                "--json")[1])["blocks"]}
    [mail] = [r for r in rows.values() if r["type"] == "message"]
    assert mail["file"] == example.relative(path)
    assert rows["knowledge/delegation.md"]["file"] is None
    code, out = run(app, "lead", "--hive", str(example.root))
    assert code == 0 and "m1.md" in out  # under its id (folded to the column's width)
