"""Each tool call is tagged with the task it is for: a task's end consolidates only its
own steps, and the loop breaker stops only the task that loops."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hivemind.agent.concerns import concerned_tasks
from hivemind.agent.cycle import Agent
from hivemind.agent.services import HiveServices
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import fast_config, run_until_idle, write_agent, write_task
from tests.scripted_model import last_results, provider, scripted, tool_use

HELD = ["t1", "t2", "t1-b"]


@pytest.mark.parametrize(
    ("call_input", "expected"),
    [
        ({"task_id": "t2", "result": "see t1"}, ["t2"]),
        ({"to": HUMAN, "body": "hello", "task": "t1-b"}, ["t1-b"]),
        ({"path": "workspace/t2.md", "content": "x"}, ["t2"]),
        ({"path": "workspace/t1-b/notes.md"}, ["t1-b"]),
        ({"path": "workspace/t10.md"}, HELD),
        ({"path": "workspace/t1-c.md"}, HELD),
        ({"subject": "t1 and t2", "body": "both"}, ["t1", "t2"]),
        ({"title": "follow-up", "depends_on": ["t2"]}, ["t2"]),
        ({"path": "workspace/out.md", "content": "all about t1 " * 100}, HELD),
        ({"task_id": "t9", "path": "workspace/t1.md"}, ["t1"]),
        ({"pattern": "TODO"}, HELD),
    ],
    ids=[
        "named-task-id", "named-task-field", "path-names-it", "folder-names-it",
        "not-inside-a-longer-id", "not-the-start-of-another-id", "two-named-in-a-subject",
        "in-a-list", "long-content-is-not-addressing", "named-but-not-held", "nothing-tells",
    ],
)
def test_a_call_concerns_the_task_it_names_else_every_task_held(
    call_input: dict[str, Any], expected: list[str]
) -> None:
    assert concerned_tasks(call_input, HELD) == expected


def test_with_no_task_held_a_call_concerns_none() -> None:
    assert concerned_tasks({"task_id": "t1"}, []) == []


# -- through a cycle, with the real SDK against the fake Messages API ----------------------

WORTH = "we decided never to deploy on Friday: the release failed badly, critical lesson"


def cycles(hive: Hive) -> list[dict[str, Any]]:
    lines = hive.audit_path("worker").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "cycle"]


def test_a_looping_task_is_stopped_and_the_other_goes_on(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    write_task(hive, "t2")
    again = {"to": HUMAN, "body": "still on it", "task": "t1"}
    with FakeAnthropic() as api:
        api.responder = scripted(
            [tool_use(1, "send_message", **again)],
            [tool_use(2, "send_message", **again)],
            [tool_use(3, "send_message", **again)],
            [tool_use(4, "complete_task", task_id="t2", result="t2 is done")],
        )
        run_until_idle(hive, provider(api))
        told = last_results(api.message_requests[3].body)

    failed = (hive.failed_dir / "t1.md").read_text()
    assert "stopped: the same tool call was repeated 3 times" in failed
    assert "t2 is done" in (hive.done_dir / "t2.md").read_text()
    [note] = told
    assert note.startswith(f"delivered to {HUMAN}\n[hivemind] task t1 was stopped: the same "
                           "tool call was repeated 3 times (send_message")
    assert note.endswith("it is in tasks/failed/")
    [record] = cycles(hive)
    assert [c["error"] for c in record["tool_calls"]] == [False, False, True, False]
    assert record["effects"]["tasks_failed"] == ["t1"]
    assert record["effects"]["tasks_completed"] == ["t2"]


def test_a_call_whose_answer_changes_each_time_is_no_loop(hive: Hive) -> None:
    """A folder listed again after each write is progress: the third listing failed the
    task as a loop."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    listing = {"path": "workspace"}
    with FakeAnthropic() as api:
        api.responder = scripted(
            [tool_use(1, "list_files", **listing)],
            [tool_use(2, "write_file", path="workspace/a.md", content="a")],
            [tool_use(3, "list_files", **listing)],
            [tool_use(4, "write_file", path="workspace/b.md", content="b")],
            [tool_use(5, "list_files", **listing)],
            [tool_use(6, "complete_task", task_id="t1", result="listed three times")],
        )
        run_until_idle(hive, provider(api))

    assert "listed three times" in (hive.done_dir / "t1.md").read_text()
    [record] = cycles(hive)
    assert not any(c["error"] for c in record["tool_calls"])


def test_a_loop_while_no_task_is_held_ends_the_cycle(hive: Hive) -> None:
    write_agent(hive, "worker")
    PostOffice(hive).send(HUMAN, "worker", "hello", "say something")
    again = tool_use(1, "send_message", to=HUMAN, body="noted")
    with FakeAnthropic() as api:
        api.responder = lambda _body: Reply(body=message_body([again], stop_reason="tool_use"))
        run_until_idle(hive, provider(api))
        requests = len(api.message_requests)

    assert requests == 3  # not max_steps (8): the third repeat ends the cycle
    [record] = cycles(hive)
    assert "[hivemind] this cycle was stopped" in record["tool_calls"][2]["result"]
    assert record["tool_calls"][2]["error"] is True


async def test_the_same_reply_in_separate_cycles_is_no_loop(hive: Hive) -> None:
    write_agent(hive, "worker")
    with FakeAnthropic() as api:
        def reply(body: Any) -> Reply:
            if last_results(body):
                return Reply(body=message_body([{"type": "text", "text": "ok"}]))
            call = tool_use(1, "send_message", to=HUMAN, body="noted")
            return Reply(body=message_body([call], stop_reason="tool_use"))

        api.responder = reply
        services = HiveServices.open(hive, provider(api), fast_config(hive))
        agent = Agent("worker", services)
        for i in range(4):
            services.post.send(HUMAN, "worker", f"note {i}", "for your information")
            report = await agent.cycle()
            assert report.ran and report.error is None
        sent_back = [r for body in api.message_requests for r in last_results(body.body)]

    assert len(api.message_requests) == 8  # each cycle: the reply, then its end
    assert sent_back == [f"delivered to {HUMAN}"] * 4


def test_a_task_end_consolidates_its_own_steps_only(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    write_task(hive, "t2")
    with FakeAnthropic() as api:
        api.responder = scripted(
            [tool_use(1, "send_message", to=HUMAN, body=WORTH, task="t1"),
             tool_use(2, "write_file", path="workspace/t2.md", content="a plain note")],
            [tool_use(3, "complete_task", task_id="t1", result="ok"),
             tool_use(4, "complete_task", task_id="t2", result="ok")],
        )
        run_until_idle(hive, provider(api))

    [record] = cycles(hive)
    ends = {m["task_id"]: m for m in record["effects"]["memories"] if m["op"] == "end_task"}
    assert set(ends) == {"t1", "t2"}
    assert len(ends["t1"]["consolidated"]) == 1  # the message about Friday deploys
    assert ends["t2"]["consolidated"] == []  # before: t2 kept t1's message as its own


def test_a_repeat_for_a_task_finished_in_the_same_round_stops_nothing(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    write_task(hive, "t2")
    again = {"to": HUMAN, "body": "on it", "task": "t1"}
    with FakeAnthropic() as api:
        api.responder = scripted(
            [tool_use(1, "send_message", **again)],
            [tool_use(2, "send_message", **again)],
            [tool_use(3, "send_message", **again),
             tool_use(4, "complete_task", task_id="t1", result="t1 is done")],
            [tool_use(5, "complete_task", task_id="t2", result="t2 is done")],
        )
        run_until_idle(hive, provider(api))
        requests = len(api.message_requests)

    # Four rounds, the last ending the last task (no closing call): not cut short.
    assert requests == 4
    assert {p.stem for p in hive.done_dir.glob("*.md")} == {"t1", "t2"}
    [record] = cycles(hive)
    assert record["ended"] == "last task ended"
    assert not any("[hivemind]" in c["result"] for c in record["tool_calls"])
