"""`hivemind task show`, `task cancel`, `task reassign`: one task, looked at or steered by
a person; files moved (never deleted), mistakes told in one line."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.tasks.board import TaskBoard
from tests.helpers import run_until_idle, write_agent, write_task


def hm(hive: Hive, *args: str) -> Any:
    return CliRunner().invoke(app, [*args, "--hive", str(hive.root)])


def held_by(hive: Hive, agent: str, stem: str, front: str = "") -> None:
    write_task(hive, stem, "Refund order 42.", front=front)
    board = TaskBoard(hive, settle_time=0)
    [ref] = [r for r in board.scan_pending() if r.id == stem]
    assert board.claim(ref, agent) is not None


def one_line_error(result: Any) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: ")
    return str(line)


# -- cancel ----------------------------------------------------------------------------


def test_cancel_moves_a_pending_task_to_failed_with_the_reason(hive: Hive) -> None:
    write_task(hive, "t1", front="priority: high  # the client waits\n")

    result = hm(hive, "task", "cancel", "t1", "--reason", "client withdrew")

    assert result.exit_code == 0, result.output
    assert "t1: cancelled, now" in result.output and "tasks/failed/t1.md" in result.output
    assert not (hive.tasks_dir / "t1.md").exists()
    text = (hive.failed_dir / "t1.md").read_text()
    assert "priority: high  # the client waits\n" in text  # the person's line, as written
    assert "status: failed" in text
    assert text.endswith("Do the thing.\n\n## Cancelled\n\ncancelled by human: client withdrew\n")


def test_cancel_of_a_held_task_tells_its_agent(hive: Hive) -> None:
    write_agent(hive, "worker")
    held_by(hive, "worker", "t1")

    result = hm(hive, "task", "cancel", "t1")

    assert result.exit_code == 0, result.output
    assert "worker was told" in result.output
    assert not list(hive.active_dir.rglob("*.md"))
    assert "agent: worker" in (hive.failed_dir / "t1.md").read_text()
    [mail] = Mailbox(hive, "worker").unread()
    assert (mail.message.from_, mail.message.subject, mail.message.task) == (
        HUMAN, "[cancelled] t1", "t1")
    assert "stop working on it" in mail.message.body


def test_cancel_warns_of_the_tasks_that_wait_for_it(hive: Hive) -> None:
    write_task(hive, "t1")
    write_task(hive, "t2", front="depends_on: [t1]\n")

    result = hm(hive, "task", "cancel", "t1")

    assert result.exit_code == 0, result.output
    assert ("warning: t2 depends on t1 and will wait for it until cancelled too or its "
            "depends_on is edited") in " ".join(result.output.split())


def test_show_of_a_held_task_names_its_holder(hive: Hive) -> None:
    write_agent(hive, "worker")
    held_by(hive, "worker", "t1", front="assignee: worker\n")

    result = hm(hive, "task", "show", "t1")

    assert result.exit_code == 0, result.output
    assert result.output.startswith("t1 active, ")
    assert "held by worker; assigned to worker" in result.output


@pytest.mark.parametrize("state", ["done", "failed"])
def test_cancel_of_a_finished_task_is_refused(hive: Hive, state: str) -> None:
    folder = hive.done_dir if state == "done" else hive.failed_dir
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t1.md").write_text(f"---\nstatus: {state}\n---\n# t1\n")

    line = one_line_error(hm(hive, "task", "cancel", "t1"))

    assert line == (f"error: task t1 is {state} (in tasks/{state}/t1.md); only a pending or "
                    "active task can be cancelled")
    assert (folder / "t1.md").read_text() == f"---\nstatus: {state}\n---\n# t1\n"


def test_cancel_of_an_unknown_id_says_where_it_looked(hive: Hive) -> None:
    line = one_line_error(hm(hive, "task", "cancel", "nope"))

    assert line.startswith("error: no task 'nope' in ")
    assert "tasks/, active/, done/, failed/ and rejected/" in line


# -- reassign --------------------------------------------------------------------------


def test_reassign_of_a_pending_task_sets_its_assignee_in_place(hive: Hive) -> None:
    write_agent(hive, "alice")
    write_agent(hive, "bob")
    write_task(hive, "t1", front="assignee: alice  # first pick\n")

    result = hm(hive, "task", "reassign", "t1", "bob")

    assert result.exit_code == 0, result.output
    assert "t1: assigned to bob" in result.output
    text = (hive.tasks_dir / "t1.md").read_text()
    assert "assignee: bob\n" in text and "alice  # first pick" not in text
    assert "## Reassigned\n\ngiven to bob by human (was: alice)\n" in text
    assert "status:" not in text  # still just a pending file
    assert sorted(p.name for p in hive.tasks_dir.iterdir() if p.is_file()) == ["t1.md"]


def test_reassign_of_a_held_task_gives_it_back_to_tasks_for_the_new_agent(hive: Hive) -> None:
    write_agent(hive, "alice")
    write_agent(hive, "bob")
    held_by(hive, "alice", "t1")

    result = hm(hive, "task", "reassign", "t1", "bob")

    assert result.exit_code == 0, result.output
    assert "alice was told" in result.output
    assert not (hive.active_dir_for("alice") / "t1.md").exists()
    [ref] = TaskBoard(hive, settle_time=0).scan_pending()
    assert (ref.id, ref.task.assignee, ref.task.agent) == ("t1", "bob", None)
    [mail] = Mailbox(hive, "alice").unread()
    assert mail.message.subject == "[reassigned] t1"
    run_until_idle(hive)
    assert "agent: bob" in (hive.done_dir / "t1.md").read_text()


def test_reassign_json_says_where_the_task_is_and_who_was_told(hive: Hive) -> None:
    write_agent(hive, "alice")
    write_agent(hive, "bob")
    held_by(hive, "alice", "t1")

    result = hm(hive, "task", "reassign", "t1", "bob", "--json")

    assert json.loads(result.output) == {"id": "t1", "path": str(hive.tasks_dir / "t1.md"),
                                         "told": "alice"}


def test_reassign_to_an_unknown_agent_is_refused_and_moves_nothing(hive: Hive) -> None:
    write_agent(hive, "alice")
    write_task(hive, "t1")
    before = (hive.tasks_dir / "t1.md").read_text()

    line = one_line_error(hm(hive, "task", "reassign", "t1", "nobody"))

    assert line == "error: unknown agent 'nobody' (agents: alice)"
    assert (hive.tasks_dir / "t1.md").read_text() == before


def test_reassign_to_the_agent_it_already_has_is_refused(hive: Hive) -> None:
    write_agent(hive, "alice")
    held_by(hive, "alice", "t1")

    line = one_line_error(hm(hive, "task", "reassign", "t1", "alice"))

    assert line == "error: alice holds task t1 already"


def test_reassign_of_a_done_task_is_refused(hive: Hive) -> None:
    write_agent(hive, "alice")
    write_task(hive, "t1")
    run_until_idle(hive)

    line = one_line_error(hm(hive, "task", "reassign", "t1", "alice"))

    assert line.startswith("error: task t1 is done (in tasks/done/t1.md)")


# -- show ------------------------------------------------------------------------------


def test_show_gives_fields_body_result_holder_and_cycles_of_a_done_task(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Refund order 42.", front="priority: high\n")
    run_until_idle(hive)

    result = hm(hive, "task", "show", "t1")

    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("t1 done, ") and "tasks/done/t1.md" in out.splitlines()[0]
    assert "done by worker; worked on by worker" in out
    assert "result: The offline provider wrote workspace/t1.md" in out
    assert "priority: high\n" in out and "Refund order 42." in out
    assert "cycles (1)" in out
    [cycle] = [line for line in out.splitlines() if line.startswith("  20")]
    assert " worker #1  done; " in cycle and "complete_task" in cycle and "tokens" in cycle


def test_show_of_a_cancelled_task_gives_the_reason(hive: Hive) -> None:
    write_task(hive, "t1")
    hm(hive, "task", "cancel", "t1", "--reason", "not needed")

    out = hm(hive, "task", "show", "t1").output

    assert "reason: cancelled by human: not needed" in out
    assert "no cycle worked on it yet" in out


def test_show_of_a_rejected_file_gives_its_reason(hive: Hive) -> None:
    hive.rejected_dir.mkdir(parents=True, exist_ok=True)
    (hive.rejected_dir / "bad.md").write_text("---\npriority: urgent\n---\n# Bad\n")
    (hive.rejected_dir / "bad.md.reason").write_text("line 2: priority must be one of ...\n")

    result = hm(hive, "task", "show", "bad", "--json")

    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert (shown["state"], shown["outcome"]) == ("rejected",
                                                  "line 2: priority must be one of ...")


def test_show_never_reads_a_rejected_hard_link_to_a_file_outside(hive: Hive) -> None:
    outside = hive.root.parent / "secret.txt"
    outside.write_text("---\ntitle: SECRET KEY 1234\n---\nSECRET\n")
    hive.rejected_dir.mkdir(parents=True, exist_ok=True)
    os.link(outside, hive.rejected_dir / "leak.md")
    (hive.rejected_dir / "leak.md.reason").write_text("the file has 2 hard links\n")

    result = hm(hive, "task", "show", "leak")

    assert result.exit_code == 0, result.output
    assert "SECRET" not in result.output
    assert "reason: the file has 2 hard links" in result.output


def test_show_of_an_unknown_id_is_one_line(hive: Hive) -> None:
    line = one_line_error(hm(hive, "task", "show", "nope"))
    assert line.startswith("error: no task 'nope'")


def test_show_refuses_an_id_that_is_a_path(hive: Hive) -> None:
    line = one_line_error(hm(hive, "task", "show", "../hive.toml"))
    assert line.startswith("error: no task '../hive.toml': id must be a plain file name")
