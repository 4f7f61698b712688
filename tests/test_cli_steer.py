"""`hivemind pause`, `resume`, `task retry`: steering a hive from the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive
from hivemind.hive.models import TaskState
from hivemind.hive.steering import pause_path, paused_agents
from hivemind.hive.tasks.board import TaskBoard
from tests.helpers import run_until_idle, write_agent, write_task


def cli(hive: Hive, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--hive", str(hive.root)])
    return result.exit_code, result.output


def failed_task(hive: Hive, stem: str = "t1") -> None:
    """A task that failed for good, through the board as an agent fails one."""
    write_task(hive, stem, front="max_attempts: 1\n")
    board = TaskBoard(hive, settle_time=0)
    [ref] = [r for r in board.scan_pending() if r.id == stem]
    held = board.claim(ref, "worker")
    assert held is not None
    board.fail(held, "the API was down", "worker")
    assert (hive.failed_dir / f"{stem}.md").exists()


def test_pause_keeps_the_pause_in_the_state_folder_and_resume_lifts_it(hive: Hive) -> None:
    write_agent(hive, "worker")

    code, out = cli(hive, "pause", "worker")

    assert code == 0 and "paused worker" in out
    assert set(paused_agents(hive)) == {"worker"}
    assert json.loads(pause_path(hive, "worker").read_text())["paused"] is True
    code, out = cli(hive, "resume", "worker")
    assert code == 0 and "resumed worker" in out
    assert paused_agents(hive) == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("pause", "nobody"), "error: unknown agent 'nobody' (agents: worker)"),
        (("resume", "nobody"), "error: unknown agent 'nobody' (agents: worker)"),
        (("resume", "worker"), "error: worker is not paused"),
    ],
    ids=["pause-unknown", "resume-unknown", "resume-not-paused"],
)
def test_steering_an_agent_that_cannot_be_says_why_in_one_line(
    hive: Hive, args: tuple[str, ...], message: str
) -> None:
    write_agent(hive, "worker")

    code, out = cli(hive, *args)

    assert code == 1
    assert out.strip() == message


def test_pausing_a_paused_agent_is_refused_and_says_how_to_resume(hive: Hive) -> None:
    write_agent(hive, "worker")
    cli(hive, "pause", "worker")

    code, out = cli(hive, "pause", "worker")

    assert code == 1 and "worker is paused already" in out and "hivemind resume worker" in out


def test_resume_of_an_agent_disabled_in_its_rom_names_the_rom(hive: Hive) -> None:
    write_agent(hive, "worker", front="enabled: false\n")

    code, out = cli(hive, "resume", "worker")

    assert code == 1
    assert "worker is paused by its ROM (enabled: false)" in " ".join(out.split())


def test_retry_moves_a_failed_task_back_with_its_history_and_attempts_afresh(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    failed_task(hive)

    code, out = cli(hive, "task", "retry", "t1")

    assert code == 0 and "retried t1" in out and "was failed" in out
    back = hive.tasks_dir / "t1.md"
    assert not (hive.failed_dir / "t1.md").exists()
    task = read_task(back)
    assert (task.status, task.attempts, task.agent, task.finished_at) == (
        TaskState.PENDING, 0, None, None)
    assert task.retried_at is not None  # its ceilings' counts start again from then
    text = back.read_text()
    assert "## Attempt 1 failed\n\nthe API was down" in text
    assert "## Retried" in text and "after 1 attempt(s)" in text
    run_until_idle(hive)
    assert (hive.done_dir / "t1.md").exists()  # done this time


@pytest.mark.parametrize(
    ("stem", "message"),
    [
        ("ghost", "error: no task 'ghost' on the board"),
        ("t2", "error: task t2 is pending (tasks/t2.md); only a failed or rejected task"),
    ],
    ids=["unknown-id", "pending-task"],
)
def test_retry_of_a_task_not_failed_says_why_in_one_line(
    hive: Hive, stem: str, message: str
) -> None:
    write_task(hive, "t2")

    code, out = cli(hive, "task", "retry", stem)

    assert code == 1
    assert " ".join(out.split()).startswith(message)


def test_a_rejected_file_still_broken_stays_rejected_with_its_reason(hive: Hive) -> None:
    bad = hive.rejected_dir / "bad.md"
    bad.write_text("---\npriority: urgent\n---\n# Bad\n")
    (hive.rejected_dir / "bad.md.reason").write_text("an old reason\n")

    code, out = cli(hive, "task", "retry", "bad")

    assert code == 1
    assert "tasks/rejected/bad.md: still rejected: line 2: priority must be one of" in out
    assert bad.exists() and not (hive.tasks_dir / "bad.md").exists()
    reason = (hive.rejected_dir / "bad.md.reason").read_text()
    assert reason.startswith("line 2: priority must be one of")  # the reason of now


def test_a_fixed_rejected_file_goes_back_to_tasks(hive: Hive) -> None:
    bad = hive.rejected_dir / "bad.md"
    bad.write_text("---\npriority: high\n---\n# Bad no more\n")
    (hive.rejected_dir / "bad.md.reason").write_text("line 2: priority urgent\n")

    code, out = cli(hive, "task", "retry", "bad")

    assert code == 0 and "was rejected" in out
    back = hive.tasks_dir / "bad.md"
    assert read_task(back).priority == "high"
    assert "it had been rejected: line 2: priority urgent" in back.read_text()
    assert not bad.exists() and not (hive.rejected_dir / "bad.md.reason").exists()


def test_a_rejected_link_is_not_followed_on_retry(hive: Hive, tmp_path: object) -> None:
    outside = hive.root.parent / "secret.md"
    outside.write_text("# secret\n")
    (hive.rejected_dir / "linked.md").symlink_to(outside)

    code, out = cli(hive, "task", "retry", "linked")

    assert code == 1 and "not a regular file" in out
    assert (hive.rejected_dir / "linked.md").is_symlink()


def test_status_names_the_agents_paused_without_a_daemon(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob", front="enabled: false\n")
    cli(hive, "pause", "ann")

    code, out = cli(hive, "status")
    _, as_json = cli(hive, "status", "--json")

    assert code == 0
    flat = " ".join(out.split())
    assert "ann is paused by human at" in flat and "`hivemind resume ann` resumes it" in flat
    assert "bob is paused: its ROM says enabled: false" in flat
    paused = {a["name"]: a["paused"] for a in json.loads(as_json)["agents"]}
    assert paused["bob"] == "paused: its ROM says enabled: false"
