"""`hivemind memory ...` end to end on a real hive folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import HUMAN, Hive
from hivemind.ltm.store import LongTermMemory

runner = CliRunner()

LINES = [
    {"id": "s1-t1", "content": "I adopted a greyhound named Pixel last week",
     "timestamp": "2024-01-10T09:00:00Z"},
    {"id": "s1-t2", "content": "Greyhounds are gentle dogs that love naps",
     "timestamp": "2024-01-10T09:01:00Z"},
    {"id": "s2-t1", "content": "My new job at the observatory starts in March",
     "timestamp": "2024-02-01T18:00:00Z", "importance": 0.9, "tags": ["work"]},
]  # fmt: skip


def run(hive: Hive, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memory", *args, "--hive", str(hive.root)])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def imported(hive: Hive, tmp_path: Path) -> Hive:
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in LINES) + "\n")
    code, out, _ = run(hive, "import", str(path))
    assert code == 0, out
    return hive


def test_import_reports_bad_lines_by_number_and_imports_the_rest(
    hive: Hive, tmp_path: Path
) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "\n".join(
            [json.dumps(LINES[0]), '{"id": "x"}', "not json", json.dumps(LINES[1]),
             '{"content": "z", "importance": "high"}']
        )
    )  # fmt: skip
    code, out, err = run(hive, "import", str(path))
    assert code == 0
    assert "imported 2 memories" in out and "3 bad lines skipped" in out
    assert "lines/s" in out
    assert "line 2: content is missing" in err
    assert "line 3: not valid JSON" in err
    assert "line 5: importance" in err
    assert "Traceback" not in out + err


def test_import_of_only_bad_lines_fails(hive: Hive, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"nope": 1}\n')
    code, _, err = run(hive, "import", str(path))
    assert code == 1 and "no line could be imported" in err


def test_import_of_a_missing_file_is_one_line(hive: Hive, tmp_path: Path) -> None:
    code, out, err = run(hive, "import", str(tmp_path / "missing.jsonl"))
    assert code == 1
    assert "missing.jsonl: cannot read" in err and "Traceback" not in out + err


def test_search_json_prints_one_array_of_results(imported: Hive) -> None:
    code, out, _ = run(imported, "search", "what is my greyhound named", "--json", "--k", "2")
    assert code == 0
    results = json.loads(out)
    assert len(results) == 2 and results[0]["id"] == "s1-t1"
    assert set(results[0]) >= {"id", "score", "relevance", "recency", "importance", "content"}


@pytest.mark.parametrize("store", ["hive", "imported"], ids=["empty-store", "no-match"])
def test_search_json_without_results_prints_an_empty_array(
    request: pytest.FixtureRequest, store: str
) -> None:
    code, out, _ = run(request.getfixturevalue(store), "search", "zeppelin", "--json")
    assert code == 0 and json.loads(out) == []


def test_search_at_sets_now_for_recency(imported: Hive) -> None:
    code, out, _ = run(imported, "search", "observatory job", "--json", "--at", "2024-02-02")
    assert code == 0
    [result] = json.loads(out)
    assert result["id"] == "s2-t1" and result["recency"] == 1.0


def test_search_queries_prints_one_line_per_query(imported: Hive, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        "\n".join(
            [
                json.dumps({"id": "q1", "query": "greyhound", "k": 1}),
                json.dumps({"id": 2, "query": "observatory", "at": "2024-03-01T00:00:00Z"}),
                json.dumps({"id": "q3"}),
                json.dumps({"id": "q4", "query": '"AND NEAR( col:*'}),
            ]
        )
    )
    code, out, err = run(imported, "search", "--queries", str(queries))
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["id"] for line in lines] == ["q1", 2, "q3", "q4"]
    assert len(lines[0]["results"]) == 1 and lines[0]["results"][0]["id"] in ("s1-t1", "s1-t2")
    assert set(lines[0]["results"][0]) >= {"id", "score", "relevance", "recency", "importance"}
    assert lines[1]["results"][0]["id"] == "s2-t1"
    assert lines[2]["results"] == [] and "query is missing" in lines[2]["error"]
    assert "line 3: query is missing" in err
    assert lines[3]["results"] == []


def test_search_is_read_only(imported: Hive) -> None:
    run(imported, "search", "greyhound")
    _, out, _ = run(imported, "export")
    assert all(json.loads(line)["access_count"] == 0 for line in out.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "--at", "someday"], "--at: 'someday' is not an ISO 8601"),
        (["search"], "give either a QUERY or --queries FILE"),
        (["approve", "m-missing"], "no memory with id 'm-missing'"),
        (["add", "   "], "a memory needs some text"),
        (["add", "x", "--scope", "task"], "--scope must be project or global"),
        (["add", "x", "--scope", "project"], "a project memory needs the project name"),
    ],
)
def test_user_mistakes_are_one_red_line(hive: Hive, args: list[str], message: str) -> None:
    code, out, err = run(hive, *args)
    assert code == 1
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err


def test_a_missing_hive_folder_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["memory", "stats", "--hive", str(tmp_path / "nowhere")])
    assert result.exit_code == 1 and "no such hive folder" in result.stderr


def propose(hive: Hive, text: str) -> str:
    """A global preference an agent proposed (it waits for a person); its id."""
    with LongTermMemory(hive) as ltm:
        return ltm.remember(text, agent="ann", scope="global", preference=True).id


def test_a_proposal_is_found_once_approved(hive: Hive) -> None:
    memory_id = propose(hive, "Reply in British English")
    assert len(list((hive.mailbox_dir(HUMAN) / "new").glob("*.md"))) == 1
    _, found, _ = run(hive, "search", "British English", "--json")
    assert json.loads(found) == []
    code, out, _ = run(hive, "approve", memory_id)
    assert code == 0 and "approved" in out
    _, found, _ = run(hive, "search", "British English", "--json")
    assert json.loads(found)[0]["id"] == memory_id


def test_a_preference_the_person_adds_is_active_at_once(hive: Hive) -> None:
    code, out, _ = run(hive, "add", "Reply in British English", "--preference", "--json")
    assert code == 0 and json.loads(out)["status"] == "active"
    assert not list((hive.mailbox_dir(HUMAN) / "new").glob("*.md"))  # nobody to ask
    _, found, _ = run(hive, "search", "British English", "--json")
    assert json.loads(found)[0]["id"] == json.loads(out)["id"]


def test_adding_what_an_agent_proposed_approves_it(hive: Hive) -> None:
    memory_id = propose(hive, "Reply in British English")
    code, out, _ = run(hive, "add", "Reply in British English", "--preference", "--json")
    assert code == 0 and json.loads(out) | {"status": "active"} == json.loads(out)
    assert json.loads(out)["id"] == memory_id


def test_approve_takes_several_ids_and_names_the_unknown(hive: Hive) -> None:
    first, second = propose(hive, "Reply in British English"), propose(hive, "Dates in ISO")
    code, out, err = run(hive, "approve", first, "m-missing", second)
    assert code == 1 and out.count("approved") == 2
    assert err.strip() == "error: no memory with id 'm-missing'"


def test_add_to_a_project_is_seen_only_with_that_project(hive: Hive) -> None:
    code, out, _ = run(hive, "add", "Apollo ships on Thursdays", "--project", "apollo")
    assert code == 0 and "project apollo" in out
    _, none, _ = run(hive, "search", "ships Thursdays", "--json")
    _, some, _ = run(hive, "search", "ships Thursdays", "--json", "--project", "apollo")
    assert json.loads(none) == [] and len(json.loads(some)) == 1


def test_add_json_prints_the_new_memory(hive: Hive) -> None:
    code, out, _ = run(hive, "add", "Apollo ships on Thursdays", "--project", "apollo",
                       "--importance", "0.7", "--json")  # fmt: skip
    assert code == 0
    added = json.loads(out)
    assert added["status"] == "active" and added["tier"] == "project"
    assert added["project"] == "apollo" and added["importance"] == 0.7
    _, found, _ = run(hive, "search", "ships Thursdays", "--json", "--project", "apollo")
    assert json.loads(found)[0]["id"] == added["id"]


def test_approve_json_prints_the_now_active_memory(hive: Hive) -> None:
    memory_id = propose(hive, "Reply in British English")
    code, out, _ = run(hive, "approve", memory_id, "--json")
    assert code == 0
    approved = json.loads(out)
    assert approved["id"] == memory_id and approved["status"] == "active"
    assert approved["content"] == "Reply in British English"


def test_export_reimports_into_another_hive(imported: Hive, tmp_path: Path) -> None:
    code, out, _ = run(imported, "export")
    assert code == 0
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out)
    other = Hive(tmp_path / "other").ensure()
    code, msg, _ = run(other, "import", str(dump))
    assert code == 0 and "imported 3 memories" in msg
    _, again, _ = run(other, "export")
    assert again == out


def test_stats_json(imported: Hive) -> None:
    code, out, _ = run(imported, "stats", "--json")
    stats = json.loads(out)
    assert code == 0 and stats["total"] == 3 and stats["by_tier"] == {"global": 3}


def test_stats_of_an_empty_store_shows_a_dash_for_no_time(hive: Hive) -> None:
    code, out, _ = run(hive, "stats")
    assert code == 0 and "None" not in out
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in out.splitlines() if line.count("│") == 3}  # fmt: skip
    assert rows["oldest"] == "-" and rows["newest"] == "-"


def test_stats_json_of_an_empty_store_keeps_null_times(hive: Hive) -> None:
    _, out, _ = run(hive, "stats", "--json")
    stats = json.loads(out)
    assert stats["oldest"] is None and stats["newest"] is None


@pytest.mark.parametrize(
    "command", ["import", "search", "add", "export", "stats", "approve", "forget"]
)
def test_every_command_explains_itself(command: str) -> None:
    result = runner.invoke(app, ["memory", command, "--help"])
    assert result.exit_code == 0
    assert "--hive" in result.stdout
