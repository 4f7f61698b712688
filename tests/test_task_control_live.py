"""A task cancelled or reassigned while its agent's model thinks: the agent cannot end
it, is told by mail, and the daemon never finishes it behind the person's back."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, MailItem
from hivemind.hive.taskcontrol import cancel, reassign
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import active_tasks, is_first_round, last_results, text_reply, tool_use


def _mail(hive: Hive, name: str) -> list[MailItem]:
    box = Mailbox(hive, name)
    return box.unread() + box.read_items()


def _completes_after(change: Any, log: list[dict[str, Any]]) -> Any:
    """A model that, the first time it is shown t1, has `change` made to it while it
    thinks, then calls complete_task on t1; later turns complete what they are shown."""
    def reply(body: Any) -> Reply:
        log.append(body)
        held = active_tasks(body)
        if not is_first_round(body):
            return text_reply("ok")
        if "t1" in held and not any("t1" in active_tasks(b) for b in log[:-1]):
            change()
            call = tool_use(len(log), "complete_task", task_id="t1", result="Refund sent.")
            return Reply(body=message_body([call], stop_reason="tool_use"))
        calls = [tool_use(i, "complete_task", task_id=t, result="done") for i, t in
                 enumerate(held)]
        return Reply(body=message_body(calls, stop_reason="tool_use") if calls
                     else message_body([{"type": "text", "text": "nothing to do"}]))
    return reply


def test_a_task_cancelled_while_its_model_thinks_stays_failed_and_its_agent_is_told(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Refund order 42.")
    log: list[dict[str, Any]] = []
    with FakeAnthropic() as api:
        api.responder = _completes_after(lambda: cancel(hive, "t1", "customer withdrew"), log)
        run_until_idle(hive, scripted_model.provider(api))

    failed = (hive.failed_dir / "t1.md").read_text()
    assert "## Cancelled\n\ncancelled by human: customer withdrew\n" in failed
    assert "status: failed" in failed and "Refund sent." not in failed
    assert not (hive.done_dir / "t1.md").exists()
    assert not list(hive.active_dir.rglob("*.md"))
    # The model's call on it was refused, saying where the task is now.
    [refused] = last_results(log[1])
    assert "no longer claimed by worker" in refused and "tasks/failed/t1.md" in refused
    # The agent was told by mail (and read it at its next cycle).
    told = [i.message for i in _mail(hive, "worker") if i.message.from_ == HUMAN]
    assert [m.subject for m in told] == ["[cancelled] t1"]


def test_a_task_reassigned_while_its_model_thinks_goes_to_the_new_agent(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_agent(hive, "bob", front="accepts_unassigned: false\n")
    write_task(hive, "t1", "Refund order 42.", front="assignee: worker\n")
    log: list[dict[str, Any]] = []
    with FakeAnthropic() as api:
        api.responder = _completes_after(lambda: reassign(hive, "t1", "bob"), log)
        run_until_idle(hive, scripted_model.provider(api))

    done = (hive.done_dir / "t1.md").read_text()
    assert "agent: bob" in done and "assignee: bob" in done
    assert "## Reassigned\n\ngiven to bob by human (was: worker)\n" in done
    assert "Refund sent." not in done  # worker's call on it was refused
    told = [i.message for i in _mail(hive, "worker") if i.message.from_ == HUMAN]
    assert [m.subject for m in told] == ["[reassigned] t1"]


def test_a_task_cancelled_during_its_last_idle_turn_is_not_failed_again(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    # The turn answers in text: an idle turn, and the last one the task may have. The
    # ceiling would fail the task, which is no longer the agent's: it is left alone.
    write_agent(hive, "worker", front="max_idle_turns: 1\n")
    write_task(hive, "t1", "Refund order 42.")

    def reply(body: Any) -> Reply:
        if "t1" in active_tasks(body):
            cancel(hive, "t1")
        return text_reply("I will look into it.")

    with FakeAnthropic() as api:
        api.responder = reply
        run_until_idle(hive, scripted_model.provider(api))

    failed = (hive.failed_dir / "t1.md").read_text()
    assert failed.count("## ") == 1 and "## Cancelled\n\ncancelled by human\n" in failed
    assert not list(hive.failed_dir.glob("t1-*.md"))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # no cycle crashed
