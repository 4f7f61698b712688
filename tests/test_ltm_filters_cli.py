"""`hivemind memory search --domain --task-type`: only memories of that domain and kind of
task, filtered in SQL through an index."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive

LINES = [
    {"id": "b-fix", "content": "Export rule: check the VAT column", "domain": "billing",
     "task_type": "fix"},
    {"id": "b-rev", "content": "Export rule: compare VAT totals", "domain": "billing",
     "task_type": "review"},
    {"id": "o-fix", "content": "Export rule: restart the VAT exporter", "domain": "ops",
     "task_type": "fix"},
    {"id": "none", "content": "Export rule: the VAT column is optional"},
]


def run(hive: Hive, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["memory", *args, "--hive", str(hive.root)])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def labelled(hive: Hive, tmp_path: Path) -> Hive:
    path = tmp_path / "rules.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in LINES) + "\n")
    assert run(hive, "import", str(path))[0] == 0
    return hive


@pytest.mark.parametrize(("options", "ids"), [
    ([], {"b-fix", "b-rev", "o-fix", "none"}),
    (["--domain", "billing"], {"b-fix", "b-rev"}),
    (["--task-type", "fix"], {"b-fix", "o-fix"}),
    (["--domain", "billing", "--task-type", "fix"], {"b-fix"}),
    (["--domain", "sales"], set()),
], ids=["all", "domain", "task-type", "both", "none-of-that-domain"])
def test_search_keeps_only_the_domain_and_task_type_asked(
    labelled: Hive, options: list[str], ids: set[str]
) -> None:
    code, out, _ = run(labelled, "search", "export VAT rule", "--json", *options)
    assert code == 0
    assert {m["id"] for m in json.loads(out)} == ids


def test_batch_searches_filter_per_line_or_by_the_options(labelled: Hive, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": 1, "query": "export VAT", "task_type": "review"}) + "\n"
                       + json.dumps({"id": 2, "query": "export VAT"}) + "\n")
    code, out, _ = run(labelled, "search", "--queries", str(queries), "--domain", "ops")
    assert code == 0
    first, second = (json.loads(line) for line in out.splitlines())
    assert [m["id"] for m in first["results"]] == []  # ops and review: none
    assert [m["id"] for m in second["results"]] == ["o-fix"]


def test_the_filter_uses_an_index(labelled: Hive) -> None:
    db = sqlite3.connect(labelled.memory_db)
    plan = " ".join(str(row) for row in db.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM memories WHERE domain = ? AND task_type = ?",
        ("billing", "fix")))
    assert "memories_goal" in plan


def test_a_memory_added_with_a_domain_and_task_type_is_found_by_them(hive: Hive) -> None:
    code, out, _ = run(hive, "add", "Refunds go through the ledger", "--domain", "billing",
                       "--task-type", "fix", "--json")
    assert code == 0
    added = json.loads(out)["id"]
    _, found, _ = run(hive, "search", "refunds ledger", "--json", "--domain", "billing",
                      "--task-type", "fix")
    _, other, _ = run(hive, "search", "refunds ledger", "--json", "--domain", "ops")
    assert [m["id"] for m in json.loads(found)] == [added] and json.loads(other) == []
