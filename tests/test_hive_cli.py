"""`hivemind init | task add | send | status` through typer's CliRunner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
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
    from hivemind.hive.tasks.board import TaskBoard

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


def test_status_says_a_rom_is_invalid_even_with_a_last_good_config(
    cli: typer.Typer, hive_dir: Path
) -> None:
    """With a last good copy kept (.hivemind/roms/), a broken ROM.md showed as "ok"
    (`"ok": true, "error": null` in --json): a script concluded all was well."""
    hive = Hive(hive_dir)
    [agent] = hive.agent_names()
    rom = hive.rom_path(agent)
    saved = hive_dir / ".hivemind" / "roms" / f"{agent}.md"
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text(rom.read_text())
    rom.write_text(rom.read_text().replace("---\n", "---\nrole: [unclosed\n", 1))

    text = run(cli, "status", str(hive_dir)).output
    [entry] = json.loads(run(cli, "status", str(hive_dir), "--json").output)["agents"]

    assert f"({agent} runs on its last good config meanwhile)" in text
    assert (entry["ok"], entry["last_good"]) == (False, True)
    assert entry["error"].startswith(f"agents/{agent}/ROM.md: line ")
    assert "invalid YAML" in entry["error"]


def test_status_shows_what_in_a_valid_rom_is_likely_not_meant(
    cli: typer.Typer, hive_dir: Path
) -> None:
    """A knowledge glob with a typo cut the agent off from the notes, silently."""
    hive = Hive(hive_dir)
    [agent] = hive.agent_names()
    rom = hive.rom_path(agent)
    rom.write_text(rom.read_text().replace('knowledge: ["**/*.md"]', "knowledge: ['nowhere/*.md']"))

    text = run(cli, "status", str(hive_dir)).output
    [entry] = json.loads(run(cli, "status", str(hive_dir), "--json").output)["agents"]

    assert entry["ok"] is True
    assert any("'nowhere/*.md' matches no note" in w for w in entry["warnings"])
    assert "'nowhere/*.md' matches no note" in text


def test_status_shows_a_roms_escape_sequences_instead_of_obeying_them(
    cli: typer.Typer, hive_dir: Path
) -> None:
    hive = Hive(hive_dir)
    [agent] = hive.agent_names()
    rom = hive.rom_path(agent)
    rom.write_text(rom.read_text().replace("---\n", '---\ntools: [read_file, "a\\e[2Jb"]\n', 1))
    text = run(cli, "status", str(hive_dir)).output
    assert "\x1b" not in text and "a\ufffd[2Jb" in text


@pytest.mark.parametrize("command", [["init"], ["task", "add"], ["send"], ["status"]], ids=" ".join)
def test_every_command_explains_itself(cli: typer.Typer, command: list[str]) -> None:
    text = run(cli, *command, "--help").output
    assert "--hive" in text and "Usage" in text


# -- task add --file with front matter -------------------------------------------------

FRONT_BODY = (
    "---\npriority: low\nassignee: assistant\nproject: site\n---\n# Inner heading\nDetails.\n"
)


def test_task_add_file_front_matter_counts_as_the_task_fields(
    cli: typer.Typer, hive_dir: Path
) -> None:
    body = hive_dir / "body.md"
    body.write_text(FRONT_BODY)
    result = run(cli, "task", "add", "Outer", "--file", str(body), "--hive", str(hive_dir))
    task = read_task(hive_dir / "tasks" / "outer.md")
    assert (task.id, task.title) == ("outer", "Outer")
    assert (task.priority, task.assignee, task.project) == (TaskPriority.LOW, "assistant", "site")
    assert task.body == "# Inner heading\nDetails."  # the file's body, not its front matter
    assert result.stderr == ""


def test_task_add_options_override_the_file_front_matter(cli: typer.Typer, hive_dir: Path) -> None:
    body = hive_dir / "body.md"
    body.write_text("---\nid: from-file\npriority: low\nassignee: ghost\ndepends_on: [x]\n---\n"
                    "Details.\n")
    run(cli, "task", "add", "Outer", "--file", str(body), "--priority", "high", "--assignee",
        "assistant", "--depends-on", "", "--project", "p", "--hive", str(hive_dir))
    task = read_task(hive_dir / "tasks" / "from-file.md")  # the file's id, no --id given
    assert (task.priority, task.assignee, task.project) == (TaskPriority.HIGH, "assistant", "p")
    assert task.depends_on == []
    assert task.body == "Details."


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        pytest.param("title: ok\npriority: urgent\n", "body.md: line 3: priority must be one of "
                     "critical, high, medium, low (got 'urgent')", id="priority"),
        pytest.param("id: a/b\n", "body.md: line 2: id must be a plain file name", id="id"),
        pytest.param("max_attempts: 0\n", "body.md: line 2: max_attempts must be ≥ 1", id="bound"),
        pytest.param("assignee: someone\n", "body.md: line 2: unknown agent 'someone' "
                     "(agents: assistant)", id="agent"),
        pytest.param("priority: [\n", "body.md: line 3: invalid YAML in front matter", id="yaml"),
    ],
)
def test_task_add_a_bad_field_in_the_file_is_one_line_naming_file_and_line(
    cli: typer.Typer, hive_dir: Path, front: str, expected: str
) -> None:
    body = hive_dir / "body.md"
    body.write_text(f"---\n{front}---\nDetails.\n")
    result = run(cli, "task", "add", "T", "--file", str(body), "--hive", str(hive_dir), code=1)
    assert expected in one_line_error(result)
    assert list((hive_dir / "tasks").glob("*.md")) == []



@pytest.mark.parametrize(
    ("inside", "options"),
    [
        pytest.param(False, [], id="file-outside-the-board"),
        pytest.param(False, ["--depends-on", "later"], id="with-a-dependency"),
        pytest.param(True, [], id="file-in-tasks"),
    ],
)
def test_task_add_warns_once_of_an_unknown_field_in_the_file(
    cli: typer.Typer,
    hive_dir: Path,
    caplog: pytest.LogCaptureFixture,
    inside: bool,
    options: list[str],
) -> None:
    """The board reads task files (the new one too) to find free ids and dependencies:
    the file's warning came again from those reads."""
    body = hive_dir / "tasks" / "draft.md" if inside else hive_dir / "body.md"
    body.write_text("---\npriority: low\ncolour: blue\n---\nDetails.\n")

    result = run(cli, "task", "add", "Paint", "--file", str(body), *options,
                 "--hive", str(hive_dir))  # fmt: skip

    # Outside pytest a logged warning reaches stderr (logging's last resort): caplog here.
    said = result.stderr + caplog.text
    assert said.count("unknown field") == 1
    assert (f"warning: {body}: line 3: unknown field 'colour' kept as extra"
            in " ".join(result.stderr.split()))  # fmt: skip
    assert read_task(hive_dir / "tasks" / "paint.md").extra == {"colour": "blue"}


def test_task_add_says_nothing_of_other_task_files(
    cli: typer.Typer, hive_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (hive_dir / "tasks" / "older.md").write_text("---\nmood: calm\n---\nSomeone else's.\n")
    result = run(cli, "task", "add", "Paint", "--depends-on", "older",
                 "--hive", str(hive_dir))  # fmt: skip
    assert result.stderr == ""
    assert "mood" not in caplog.text

# -- task ids from titles in any script ------------------------------------------------


@pytest.mark.parametrize(
    ("title", "stem"),
    [
        pytest.param("日本語のタスク", "日本語のタスク", id="japanese"),
        pytest.param("Überprüfung", "überprüfung", id="german"),
        pytest.param("U\u0308berpru\u0308fung", "überprüfung", id="decomposed"),
        pytest.param("हिन्दी में काम", "हिन्दी-में-काम", id="devanagari-marks"),
        pytest.param("Fix the login_bug!", "fix-the-login-bug", id="ascii"),
        pytest.param("../.hidden/ä", "hidden-ä", id="no-folders-or-dots"),
        pytest.param("🐝 🐝", "task", id="no-letters"),
    ],
)
def test_task_add_ids_keep_the_letters_of_any_script(
    cli: typer.Typer, hive_dir: Path, title: str, stem: str
) -> None:
    result = run(cli, "task", "add", title, "--json", "--hive", str(hive_dir))
    assert json.loads(result.output)["id"] == stem
    assert read_task(hive_dir / "tasks" / f"{stem}.md").title == title


def test_task_add_an_id_from_a_long_title_stays_a_short_file_name(
    cli: typer.Typer, hive_dir: Path
) -> None:
    result = run(cli, "task", "add", "語" * 100, "--json", "--hive", str(hive_dir))
    task_id = json.loads(result.output)["id"]
    assert task_id == "語" * 60 and len(f"{task_id}.md".encode()) < 255


# -- send to everyone in a hive of no agents --------------------------------------------


def test_send_to_everyone_with_no_agents_says_there_is_no_one(
    cli: typer.Typer, hive_dir: Path
) -> None:
    (hive_dir / "agents" / "assistant" / "ROM.md").unlink()
    result = run(cli, "send", "--to", "*", "text", "--hive", str(hive_dir), code=1)
    assert "has no agents, so --to '*' reaches no one" in one_line_error(result)
    assert list((hive_dir / "mailboxes").glob("*/new/*.md")) == []


# -- status of a killed daemon, of an unreadable status.json -----------------------------


def test_status_json_says_a_killed_daemon_is_not_running(cli: typer.Typer, hive_dir: Path) -> None:
    (hive_dir / "hive.toml").write_text("[daemon]\nsettle_time = 0.0\n")
    status_file = hive_dir / ".hivemind" / "status.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "hivemind", "run", str(hive_dir), "--quiet", "--offline"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not status_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = json.loads(run(cli, "status", str(hive_dir), "--json").output)["daemon"]
        assert (alive["running"], alive["pid"]) == (True, daemon.pid)
        assert "killed" not in alive
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()

    text = " ".join(run(cli, "status", str(hive_dir)).output.split())
    assert f"daemon not running (pid {daemon.pid} is gone; it was killed)" in text
    gone = json.loads(run(cli, "status", str(hive_dir), "--json").output)["daemon"]
    assert (gone["running"], gone["killed"], gone["pid"]) == (False, True, daemon.pid)
    assert json.loads(status_file.read_text())["running"] is True  # the file is left as it was


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        pytest.param("garbage{", "Expecting value", id="not-json"),
        pytest.param("[1, 2]", "not a JSON object", id="a-list"),
        pytest.param('{"agents": {"ann": "idle"}}', "(agents.ann: Input should be",
                     id="an-agent-not-an-object"),
    ],
)
def test_status_says_an_unreadable_status_json_is_unreadable(
    cli: typer.Typer, hive_dir: Path, content: str, reason: str
) -> None:
    status_file = hive_dir / ".hivemind" / "status.json"
    status_file.parent.mkdir(exist_ok=True)
    status_file.write_text(content)
    text = " ".join(run(cli, "status", str(hive_dir)).output.split())
    assert "daemon state unknown: .hivemind/status.json is not readable (" in text
    assert reason in text
    assert "None" not in text and "stopped (?)" not in text
    data = json.loads(run(cli, "status", str(hive_dir), "--json").output)
    assert data["daemon"]["error"].startswith(".hivemind/status.json is not readable (")


# -- a folder given twice --------------------------------------------------------------


@pytest.mark.parametrize("command", [["status"], ["init"]], ids=" ".join)
def test_a_dir_and_a_different_hive_option_are_refused(
    cli: typer.Typer, hive_dir: Path, tmp_path: Path, command: list[str]
) -> None:
    other = tmp_path / "other"
    run(cli, "init", str(other))
    result = run(cli, *command, str(hive_dir), "--hive", str(other), code=1)
    assert "two hive folders given: " in one_line_error(result)
    assert f"--hive {other}; give one" in result.output


def test_a_dir_and_the_same_hive_option_are_one_hive(cli: typer.Typer, hive_dir: Path) -> None:
    result = run(cli, "status", str(hive_dir), "--hive", f"{hive_dir}/.")
    assert f"hive {hive_dir}" in result.output


@pytest.mark.parametrize("command", ["send", "task add"], ids=["send", "task-add"])
def test_content_over_the_file_limit_is_refused_not_accepted_then_rejected(
    cli: typer.Typer, hive_dir: Path, command: str, tmp_path: Path
) -> None:
    """`send` and `task add --file` said yes to 2 MB, and the daemon then rejected the
    task, or read the message as from nobody, its subject dropped, its text cut."""
    hive = Hive(hive_dir)
    agent = hive.agent_names()[0]
    big = "blah " * 400_000  # 2 MB
    if command == "send":
        result = run(cli, "send", "--to", agent, "--subject", "big", "-",
                     "--hive", str(hive_dir), code=1, stdin=big)
        box = hive.mailboxes_dir / agent / "new"
        assert not box.exists() or not list(box.iterdir())
        assert "the message is 2,000,003 bytes; the most a message holds is" in result.output
    else:
        source = tmp_path / "big.md"
        source.write_text("# Big one\n\n" + big)
        result = run(cli, "task", "add", "Big one", "--file", str(source),
                     "--hive", str(hive_dir), code=1)
        assert list(hive.tasks_dir.glob("*.md")) == []
        assert "the limit is 1,000,000 (1 MB)" in result.output


def test_status_says_what_held_tasks_wait_for_and_what_a_loop_limit_refused(
    cli: typer.Typer, hive_dir: Path
) -> None:
    status_file = hive_dir / ".hivemind" / "status.json"
    status_file.parent.mkdir(exist_ok=True)
    status_file.write_text(json.dumps({
        "pid": 1, "running": False, "stopped_because": "idle", "agents": {"ann": {
            "state": "idle", "cycles": 3, "waiting": {"t1": "an answer from bob"},
            "refused": ["refused: max_delegation_depth=5"]}}}))
    text = run(cli, "status", str(hive_dir)).output
    assert "ann: t1 waits for an answer from bob" in text
    assert "ann: refused: max_delegation_depth=5" in text
