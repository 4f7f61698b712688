"""`hivemind init | task add | send | status` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from hivemind.cli import hive_cmds
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.models import TaskPriority


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    hive_cmds.register(app)
    return app


@pytest.fixture
def hive_dir(cli: typer.Typer, tmp_path: Path) -> Path:
    root = tmp_path / "hive"
    run(cli, "init", str(root))
    return root


def run(app: typer.Typer, *args: str, code: int = 0, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(app, list(args), input=stdin)
    assert result.exit_code == code, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def one_line_error(result: Result) -> str:
    text = result.output.strip()
    assert text.startswith("error: ") and "\n" not in text, text
    assert "Traceback" not in result.output
    return text


def test_init_scaffolds_and_is_rerunnable(cli: typer.Typer, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    first = run(cli, "init", str(root))
    assert "created agents/assistant/ROM.md" in first.output
    assert "hivemind task add" in first.output
    again = run(cli, "init", "--hive", str(root))
    assert "kept    hive.toml (exists)" in again.output


def test_init_refuses_a_file(cli: typer.Typer, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = run(cli, "init", str(tmp_path / "file"), code=1)
    assert "is not a folder" in one_line_error(result)


def test_task_add_prints_the_new_task_path(cli: typer.Typer, hive_dir: Path) -> None:
    body = hive_dir / "body.md"
    body.write_text("# Details\n\nThree lines, please.\n")
    result = run(
        cli, "task", "add", "Write a haiku", "--assignee", "assistant", "--priority", "high",
        "--project", "poems", "--depends-on", "a,b", "--depends-on", "c",
        "--file", str(body), "--hive", str(hive_dir),
    )  # fmt: skip
    path = Path(result.stdout.strip())
    if not path.is_absolute():
        path = Path.cwd() / path
    assert path == hive_dir / "tasks" / "write-a-haiku.md"
    task = read_task(path)
    assert (task.title, task.assignee, task.project) == ("Write a haiku", "assistant", "poems")
    assert task.priority is TaskPriority.HIGH
    assert task.depends_on == ["a", "b", "c"]
    assert task.body == "# Details\n\nThree lines, please."
    assert path.read_text().endswith("Three lines, please.\n")  # no blank line added
    # None of a, b, c is on the board: each is a typo or still to come; the user is told.
    for dep in "abc":
        assert (f"warning: no task {dep} on the board yet; write-a-haiku waits until it is "
                "in tasks/done/") in " ".join(result.stderr.split())
    assert task.created_by == HUMAN


def test_task_add_warns_of_no_dependency_that_is_on_the_board(
    cli: typer.Typer, hive_dir: Path
) -> None:
    run(cli, "task", "add", "First", "--hive", str(hive_dir))
    result = run(cli, "task", "add", "Second", "--depends-on", "first", "--hive", str(hive_dir))
    assert result.stderr == ""


def test_task_add_json_and_unique_ids(cli: typer.Typer, hive_dir: Path) -> None:
    first = json.loads(run(cli, "task", "add", "Same", "--hive", str(hive_dir), "--json").output)
    second = json.loads(run(cli, "task", "add", "Same", "--hive", str(hive_dir), "--json").output)
    assert (first["id"], second["id"]) == ("same", "same-2")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--priority", "urgent"], "priority must be one of critical", id="priority"),
        pytest.param(["--assignee", "zed"], "unknown agent 'zed' (agents: assistant)", id="agent"),
        pytest.param(["--file", "/nonexistent/body.md"], "cannot read the task body", id="file"),
        pytest.param(["--id", "a/b"], "id must be a plain file name", id="bad-id"),
    ],
)
def test_task_add_mistakes_are_one_red_line(
    cli: typer.Typer, hive_dir: Path, args: list[str], expected: str
) -> None:
    result = run(cli, "task", "add", "Title", *args, "--hive", str(hive_dir), code=1)
    assert expected in one_line_error(result)


def test_task_add_duplicate_id_is_refused(cli: typer.Typer, hive_dir: Path) -> None:
    run(cli, "task", "add", "T", "--id", "fixed", "--hive", str(hive_dir))
    result = run(cli, "task", "add", "T", "--id", "fixed", "--hive", str(hive_dir), code=1)
    assert "duplicate task id fixed (already in tasks/fixed.md)" in one_line_error(result)


def test_commands_refuse_a_folder_that_is_not_a_hive(cli: typer.Typer, tmp_path: Path) -> None:
    result = run(cli, "status", str(tmp_path), code=1)
    assert "not a hive" in one_line_error(result)
    result = run(cli, "send", "--to", "x", "hi", "--hive", str(tmp_path / "missing"), code=1)
    assert "no such hive folder" in one_line_error(result)


@pytest.mark.parametrize(
    "command",
    [["run", "--until-idle"], ["log", "ann"], ["inspect", "ann"], ["memory", "stats"],
     ["task", "add", "T"], ["status"]],
    ids=" ".join,
)
def test_no_command_makes_a_hive_of_a_folder_by_mistake(
    tmp_path: Path, command: list[str]
) -> None:
    # `hivemind run` typed in the wrong folder (the default is the current one) must not
    # scatter tasks/, agents/, mailboxes/ ... into it.
    from hivemind.cli.app import app as full

    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "letter.txt").write_text("Dear Ann")
    result = run(full, *command, "--hive", str(folder), code=1)
    assert f"{folder}: not a hive (no tasks/, agents/ or hive.toml)" in one_line_error(result)
    assert [p.name for p in folder.iterdir()] == ["letter.txt"]


def test_send_delivers_from_human(cli: typer.Typer, hive_dir: Path) -> None:
    result = run(
        cli, "send", "--to", "assistant", "--subject", "Hi", "Hello!", "--hive", str(hive_dir)
    )
    assert "mailboxes/assistant/new/" in result.output
    [item] = Mailbox(Hive(hive_dir), "assistant").unread()
    assert (item.message.from_, item.message.subject, item.message.body) == (HUMAN, "Hi", "Hello!")


def test_send_reads_stdin_with_dash(cli: typer.Typer, hive_dir: Path) -> None:
    run(cli, "send", "--to", "assistant", "-", "--hive", str(hive_dir), stdin="long text\n")
    [item] = Mailbox(Hive(hive_dir), "assistant").unread()
    assert item.message.body == "long text"  # the file's own last newline ends it


def test_send_to_unknown_agent_lists_the_agents(cli: typer.Typer, hive_dir: Path) -> None:
    result = run(cli, "send", "--to", "zed", "hi", "--hive", str(hive_dir), code=1)
    assert "unknown recipient 'zed' (agents: assistant" in one_line_error(result)


def test_status_tables_and_json(cli: typer.Typer, hive_dir: Path) -> None:
    (hive_dir / "tasks" / "bad.md").write_text("---\npriority: urgent\n---\n")
    from hivemind.hive.tasks import TaskBoard

    TaskBoard(Hive(hive_dir), settle_time=0).scan_pending()
    rom = hive_dir / "agents" / "broken" / "ROM.md"
    rom.parent.mkdir()
    rom.write_text("---\nheartbeat: -5\n---\n")
    text = run(cli, "status", str(hive_dir)).output
    for expected in ("Agents", "assistant", "broken", "heartbeat must be ≥ 0", "Tasks", "bad.md"):
        assert expected in text
    data = json.loads(run(cli, "status", "--hive", str(hive_dir), "--json").output)
    assert data["tasks"]["rejected"] == 1
    assert {a["name"]: a["ok"] for a in data["agents"]} == {"assistant": True, "broken": False}


@pytest.mark.parametrize("command", [["init"], ["task", "add"], ["send"], ["status"]], ids=" ".join)
def test_every_command_explains_itself(cli: typer.Typer, command: list[str]) -> None:
    text = run(cli, *command, "--help").output
    assert "--hive" in text and "Usage" in text
