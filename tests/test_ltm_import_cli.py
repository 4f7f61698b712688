"""`hivemind memory import`: repeated ids, ids already stored, and `--json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.ltm.importing import IMPORT_BATCH

runner = CliRunner()


def run(hive: Hive, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memory", *args, "--hive", str(hive.root)], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, name: str, *lines: dict[str, object] | str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def exported(hive: Hive) -> dict[str, str]:
    """id → content of every stored memory."""
    _, out, _ = run(hive, "export")
    return {m["id"]: m["content"] for m in map(json.loads, out.splitlines())}


DUP = ({"content": "a", "id": "z1"}, {"content": "b", "id": "z1"}, {"content": "c"})


def test_a_repeated_id_is_a_bad_line_and_the_rest_is_imported(hive: Hive, tmp_path: Path) -> None:
    code, out, err = run(hive, "import", str(write(tmp_path, "dup.jsonl", *DUP)))
    assert code == 0
    assert "line 2: id z1 already appears on line 1" in err
    assert "imported 2 memories" in out and "1 bad lines skipped" in out
    stored = exported(hive)
    assert stored["z1"] == "a" and sorted(stored.values()) == ["a", "c"]
    assert "UNIQUE" not in out + err and "Traceback" not in out + err


def test_a_bad_first_line_does_not_make_its_id_a_repeat(hive: Hive, tmp_path: Path) -> None:
    path = write(tmp_path, "f.jsonl", {"content": "a", "id": "z1", "importance": 2},
                 {"content": "b", "id": "z1"})  # fmt: skip
    code, _, err = run(hive, "import", str(path))
    assert code == 0 and "line 1: importance" in err and "already appears" not in err
    assert exported(hive) == {"z1": "b"}


def test_a_repeated_id_in_a_later_batch_is_still_a_repeat(hive: Hive, tmp_path: Path) -> None:
    lines = [{"content": f"note {i}"} for i in range(IMPORT_BATCH)]
    path = write(tmp_path, "big.jsonl", {"content": "first", "id": "z1"}, *lines,
                 {"content": "again", "id": "z1"})  # fmt: skip
    code, out, err = run(hive, "import", str(path))
    assert code == 0
    assert f"line {IMPORT_BATCH + 2}: id z1 already appears on line 1" in err
    assert f"imported {IMPORT_BATCH + 1} memories" in out
    assert exported(hive)["z1"] == "first"


def test_an_id_already_stored_is_updated_and_counted_as_such(hive: Hive, tmp_path: Path) -> None:
    run(hive, "import", str(write(tmp_path, "one.jsonl", {"content": "first", "id": "e1"})))
    path = write(tmp_path, "two.jsonl", {"content": "second", "id": "e1"},
                 {"content": "third", "id": "e3"})  # fmt: skip
    code, out, _ = run(hive, "import", str(path))
    assert code == 0 and "imported 2 memories (1 new, 1 updated)" in out
    assert exported(hive) == {"e1": "second", "e3": "third"}


def test_an_import_of_only_new_ids_says_nothing_of_updates(hive: Hive, tmp_path: Path) -> None:
    code, out, _ = run(hive, "import", str(write(tmp_path, "n.jsonl", {"content": "x"})))
    assert code == 0 and "imported 1 memories from" in out and "updated" not in out


def test_import_json_reports_counts_and_each_skipped_line(hive: Hive, tmp_path: Path) -> None:
    run(hive, "import", str(write(tmp_path, "one.jsonl", {"content": "first", "id": "z1"})))
    path = write(tmp_path, "dup.jsonl", *DUP, "not json")
    code, out, err = run(hive, "import", str(path), "--json")
    assert code == 0 and err == ""
    report = json.loads(out)
    assert (report["imported"], report["new"], report["updated"]) == (2, 1, 1)
    assert report["file"] == str(path) and report["evicted"] == 0
    assert report["skipped"] == [
        {"line": 2, "reason": "id z1 already appears on line 1"},
        {"line": 4, "reason": "not valid JSON (Expecting value at column 1)"},
    ]


def test_import_json_reads_standard_input(hive: Hive) -> None:
    code, out, _ = run(hive, "import", "-", "--json", stdin='{"content": "from a pipe"}\n')
    assert code == 0
    report = json.loads(out)
    assert report["file"] == "-" and report["imported"] == report["new"] == 1


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_import_of_only_bad_lines_is_one_error_line(
    hive: Hive, tmp_path: Path, as_json: bool
) -> None:
    path = write(tmp_path, "bad.jsonl", {"nope": 1})
    code, out, err = run(hive, "import", str(path), *(["--json"] if as_json else []))
    assert code == 1
    [error] = [line for line in err.splitlines() if line.startswith("error:")]
    assert error == f"error: {path}: no line could be imported (1 bad lines)"
    if as_json:
        assert json.loads(out)["skipped"] == [{"line": 1, "reason": "content is missing"}]
    assert "Traceback" not in out + err


def test_a_file_name_with_brackets_is_shown_as_typed(hive: Hive, tmp_path: Path) -> None:
    path = write(tmp_path, "[b]notes.jsonl", {"content": "x"})
    _, out, _ = run(hive, "import", str(path))
    assert f"from {path} " in out
    _, _, err = run(hive, "import", str(tmp_path / "[b]missing.jsonl"))
    assert f"error: {tmp_path / '[b]missing.jsonl'}: cannot read" in err
