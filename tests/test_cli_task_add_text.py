"""`hivemind task add --body TEXT` and `--file -`: a task's details without a file."""

from __future__ import annotations

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive


def add(hive: Hive, *args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["task", "add", *args, "--hive", str(hive.root)],
                                input=stdin)
    return result.exit_code, result.output


def test_body_goes_under_the_title(hive: Hive) -> None:
    code, out = add(hive, "Paint the shed", "--body", "Green, two coats.\nThe big brush.")

    assert code == 0, out
    task = read_task(hive.tasks_dir / "paint-the-shed.md")
    assert task.body == "# Paint the shed\n\nGreen, two coats.\nThe big brush."


def test_file_dash_reads_the_task_from_standard_input(hive: Hive) -> None:
    code, out = add(hive, "From a pipe", "--file", "-",
                    stdin="---\npriority: high\nproject: apollo\n---\nDetails from a pipe.\n")

    assert code == 0, out
    task = read_task(hive.tasks_dir / "from-a-pipe.md")
    assert (task.priority, task.project, task.body) == ("high", "apollo",
                                                        "Details from a pipe.")


def test_a_bad_field_on_standard_input_is_one_line_naming_it(hive: Hive) -> None:
    code, out = add(hive, "Bad", "--file", "-", stdin="---\npriority: urgent\n---\nx\n")

    assert code == 1
    assert out.strip() == ("error: <stdin>: line 2: priority must be one of critical, high, "
                           "medium, low (got 'urgent')")
    assert not list(hive.tasks_dir.glob("*.md"))


def test_body_and_file_together_are_refused(hive: Hive) -> None:
    code, out = add(hive, "Both", "--body", "a", "--file", "-", stdin="b\n")

    assert code == 1
    assert out.strip() == "error: give the details with --body or with --file, not both"
    assert not list(hive.tasks_dir.glob("*.md"))
