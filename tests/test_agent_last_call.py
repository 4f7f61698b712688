"""A round that ends the agent's last task ends its turn: no closing model call
("Done."), unless a tool failed, another task is held or unseen mail waits."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from tests.fake_anthropic import FakeAnthropic, Reply
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import is_first_round, last_results, provider, scripted, tool_use


def cycles(hive: Hive) -> list[dict[str, Any]]:
    lines = hive.audit_path("worker").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "cycle"]


def run(hive: Hive, model: Callable[[Any], Reply]) -> list[dict[str, Any]]:
    """The bodies of the requests the fake API received."""
    with FakeAnthropic() as api:
        api.responder = model
        run_until_idle(hive, provider(api))
        return [r.body for r in api.message_requests]


def test_complete_task_for_the_last_task_ends_the_turn_without_a_closing_call(
    hive: Hive,
) -> None:
    """Before: a second request carried complete_task's result, to get "done" back."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    bodies = run(hive, scripted(
        [tool_use(1, "complete_task", task_id="t1", result="the figure is 42")]))

    assert len(bodies) == 1
    assert (hive.done_dir / "t1.md").is_file()
    [record] = cycles(hive)
    assert record["ended"] == "last task ended"
    assert record["error"] is None and record["followup"] == []
    # The round stays in the record as before.
    assert [(c["name"], c["error"]) for c in record["tool_calls"]] == [("complete_task", False)]
    assert record["tool_calls"][0]["result"] == "task t1 is done (tasks/done/t1.md)"


def test_mail_shown_in_the_cycle_does_not_keep_the_turn_open(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    PostOffice(hive).send(HUMAN, "worker", "hello", "t1 is urgent")
    bodies = run(hive, scripted(
        [tool_use(1, "complete_task", task_id="t1", result="the figure is 42")]))

    assert len(bodies) == 1
    assert cycles(hive)[0]["ended"] == "last task ended"


def test_a_tool_error_in_the_round_is_sent_back_to_the_model(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    bodies = run(hive, scripted(
        [tool_use(1, "read_file", path="workspace/missing.md"),
         tool_use(2, "complete_task", task_id="t1", result="the figure is 42")]))

    assert len(bodies) == 2
    assert not is_first_round(bodies[1])
    assert "missing.md" in last_results(bodies[1])[0]
    assert cycles(hive)[0]["ended"] is None


def test_another_task_held_keeps_the_turn_open_until_it_ends(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    write_task(hive, "t2")
    bodies = run(hive, scripted(
        [tool_use(1, "complete_task", task_id="t1", result="one")],
        [tool_use(2, "complete_task", task_id="t2", result="two")]))

    # t1's end goes back to the model (t2 is held); t2's, the last, ends the turn.
    assert len(bodies) == 2
    assert last_results(bodies[1]) == ["task t1 is done (tasks/done/t1.md)"]
    [record] = cycles(hive)
    assert record["ended"] == "last task ended"
    assert {p.stem for p in hive.done_dir.glob("*.md")} == {"t1", "t2"}


def test_mail_that_arrived_during_the_round_keeps_the_turn_open(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    first = scripted([tool_use(1, "complete_task", task_id="t1", result="the figure is 42")])
    sent: list[str] = []

    def model(body: Any) -> Reply:
        if not sent:  # a person writes while the model thinks
            sent.append("yes")
            PostOffice(hive).send(HUMAN, "worker", "also", "one more thing")
        return first(body)

    bodies = run(hive, model)

    assert not is_first_round(bodies[1])  # the closing call of the first cycle
    assert cycles(hive)[0]["ended"] is None
    assert len(bodies) == 3  # and a cycle for the new mail
