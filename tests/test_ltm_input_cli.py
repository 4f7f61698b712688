"""What `hivemind memory add` and `import` refuse or accept as given: BOMs, CRLF, blank and
over-long text, contradictory or empty options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.ltm.records import MAX_CONTENT_CHARS

runner = CliRunner()
INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u3164"  # zero-width space/joiners, BOM, filler


def run(hive: Hive, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memory", *args, "--hive", str(hive.root)], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def contents(hive: Hive) -> list[str]:
    _, out, _ = run(hive, "export")
    return sorted(json.loads(line)["content"] for line in out.splitlines())


def one_error(code: int, out: str, err: str, message: str) -> None:
    assert code == 1 and message in err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in out + err


def test_a_leading_bom_and_crlf_line_ends_are_read(hive: Hive, tmp_path: Path) -> None:
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "b1", "content": "first"}\r\n{"content": "second"}\r\n')
    code, out, err = run(hive, "import", str(path))
    assert code == 0 and err == "" and "imported 2 memories" in out
    assert contents(hive) == ["first", "second"]


def test_a_bom_on_standard_input_is_read(hive: Hive) -> None:
    code, _, err = run(hive, "import", "-", stdin='\ufeff{"content": "piped"}\r\n')
    assert code == 0 and err == "" and contents(hive) == ["piped"]


def test_a_search_file_with_a_bom_is_read(hive: Hive, tmp_path: Path) -> None:
    run(hive, "add", "the staging database is Postgres")
    queries = tmp_path / "q.jsonl"
    queries.write_bytes(b'\xef\xbb\xbf{"id": "q1", "query": "staging database"}\r\n')
    code, out, err = run(hive, "search", "--queries", str(queries))
    assert code == 0 and err == ""
    assert len(json.loads(out)["results"]) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "x", "--scope", "global", "--project", "apollo"],
         "--scope global contradicts --project apollo"),
        (["add", "x", "--project", ""], "--project is empty"),
        (["add", "x", "--project", "  "], "--project is empty"),
        (["search", "x", "--project", ""], "--project is empty"),
        (["add", INVISIBLE], "a memory needs some text"),
        (["add", "x" * (MAX_CONTENT_CHARS + 1)],
         f"the memory is too long ({MAX_CONTENT_CHARS + 1:,} characters; at most "
         f"{MAX_CONTENT_CHARS:,})"),
    ],
    ids=["global-and-project", "empty-project", "blank-project", "search-empty-project",
         "invisible-text", "too-long"],
)  # fmt: skip
def test_add_refuses_with_one_line(hive: Hive, args: list[str], message: str) -> None:
    one_error(*run(hive, *args), message)
    assert contents(hive) == []


def test_import_refuses_an_empty_project(hive: Hive, tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"content": "x"}\n')
    one_error(*run(hive, "import", str(path), "--project", ""), "--project is empty")
    assert contents(hive) == []


def test_add_takes_text_of_exactly_the_cap(hive: Hive) -> None:
    code, _, _ = run(hive, "add", "x" * MAX_CONTENT_CHARS)
    assert code == 0 and contents(hive) == ["x" * MAX_CONTENT_CHARS]


def test_an_over_long_import_line_is_reported_with_file_and_line(
    hive: Hive, tmp_path: Path
) -> None:
    path = tmp_path / "huge.jsonl"
    huge = "z" * 1_000_000
    path.write_text(json.dumps({"content": "fine"}) + "\n" + json.dumps({"content": huge}) + "\n")
    code, out, err = run(hive, "import", str(path))
    assert code == 0 and "imported 1 memories" in out and "1 bad lines skipped" in out
    assert err.strip() == (
        f"skipped {path} line 2: content is too long (1,000,000 characters; at most "
        f"{MAX_CONTENT_CHARS:,})"
    )
    assert contents(hive) == ["fine"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (INVISIBLE, "content is empty"),
        ("y" * (MAX_CONTENT_CHARS + 1), "content is too long"),
    ],
    ids=["invisible", "too-long"],
)
def test_import_json_names_the_skipped_line_and_why(
    hive: Hive, tmp_path: Path, content: str, reason: str
) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(
        json.dumps({"content": "fine"}) + "\n" + json.dumps({"content": content}) + "\n"
    )
    code, out, _ = run(hive, "import", str(path), "--json")
    assert code == 0
    [skipped] = json.loads(out)["skipped"]
    assert skipped["line"] == 2 and skipped["reason"].startswith(reason)
    assert len(skipped["reason"]) < 100  # the refused text is not echoed back
    assert contents(hive) == ["fine"]


def test_help_documents_the_cap() -> None:
    for command in ("add", "import"):
        result = runner.invoke(app, ["memory", command, "--help"], terminal_width=200)
        assert f"at most {MAX_CONTENT_CHARS:,} characters" in result.stdout, command
