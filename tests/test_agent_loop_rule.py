"""The loop breaker fails only the work that loops: identical calls of one round are one
call, and a call naming no task is never a charge against a task that did not make it
(the rule: hivemind/agent/loops.py). Through the real SDK and the fake Messages API."""

from __future__ import annotations

import json
from typing import Any

from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import run_until_idle, write_agent, write_task
from tests.model_habits import HabitModel, data_files
from tests.scripted_model import last_results, provider, scripted, text_reply, tool_use

STOPPED = "stopped: the same tool call was repeated 3 times"


def cycles(hive: Hive) -> list[dict[str, Any]]:
    lines = hive.audit_path("worker").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "cycle"]


def ended(hive: Hive) -> tuple[set[str], set[str]]:
    return ({p.stem for p in hive.done_dir.glob("*.md")},
            {p.stem for p in hive.failed_dir.glob("*.md")})


def test_read_tasks_held_together_reading_the_same_files_all_end_done(hive: Hive) -> None:
    """Before: each part read once per task in one round was "repeated 3 times", and
    all three failed."""
    write_agent(hive, "worker")
    for i in (1, 2, 3):
        write_task(hive, f"read-{i}")
    data_files(hive.root)
    model = HabitModel(partners={}, reads_needed=12, reads_per_round=4)
    with FakeAnthropic() as api:
        api.responder = model
        run_until_idle(hive, provider(api))

    assert ended(hive) == ({"read-1", "read-2", "read-3"}, set())
    calls = [c for r in cycles(hive) for c in r["tool_calls"]]
    assert sum(c["name"] == "read_file" for c in calls) == 36  # each task got its answers
    assert not any(c["error"] for c in calls)


def test_the_same_read_for_each_task_in_turn_charges_none_of_them(hive: Hive) -> None:
    """One task a round, each reading the brief: a read naming no task is charged to the
    task the round works on. Before: the third read failed all three."""
    write_agent(hive, "worker")
    for i in (1, 2, 3):
        write_task(hive, f"a-{i}")
    (hive.root / "workspace").mkdir(exist_ok=True)
    (hive.root / "workspace" / "brief.md").write_text("the brief\n")
    read = {"path": "workspace/brief.md"}
    with FakeAnthropic() as api:
        api.responder = scripted(
            *[[tool_use(2 * i, "read_file", **read),
               tool_use(2 * i + 1, "write_file", path=f"workspace/a-{i}.md", content="done")]
              for i in (1, 2, 3)],
            [tool_use(10 + i, "complete_task", task_id=f"a-{i}", result="ok") for i in (1, 2, 3)],
        )
        run_until_idle(hive, provider(api))

    assert ended(hive) == ({"a-1", "a-2", "a-3"}, set())


def test_only_the_looping_task_fails_and_the_task_held_beside_it_goes_on(hive: Hive) -> None:
    """loop-1 reads the brief and rewrites its file, round after round; other-1 makes no
    call. Before: the brief's read was charged to both, and both failed."""
    write_agent(hive, "worker")
    write_task(hive, "loop-1")
    write_task(hive, "other-1")
    (hive.root / "workspace").mkdir(exist_ok=True)
    (hive.root / "workspace" / "brief.md").write_text("the brief\n")

    def reply(body: Any) -> Reply:
        if any("task loop-1 was stopped" in r for r in last_results(body)):
            done = tool_use(9, "complete_task", task_id="other-1", result="other-1 is done")
            return Reply(body=message_body([done], stop_reason="tool_use"))
        if any("other-1 is done" in r for r in last_results(body)):
            return text_reply("all done")
        again = [tool_use(1, "read_file", path="workspace/brief.md"),
                 tool_use(2, "write_file", path="workspace/loop-1.md", content="same")]
        return Reply(body=message_body(again, stop_reason="tool_use"))

    with FakeAnthropic() as api:
        api.responder = reply
        run_until_idle(hive, provider(api))
        requests = len(api.message_requests)

    assert ended(hive) == ({"other-1"}, {"loop-1"})
    assert STOPPED in (hive.failed_dir / "loop-1.md").read_text()
    assert requests == 4  # cut at the third round, within the limit


def test_the_same_read_over_and_over_still_fails_the_task(hive: Hive) -> None:
    """The loop of issue 22: one read naming no task, round after round, nothing new."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    data_files(hive.root)
    same = [tool_use(1, "read_file", path="workspace/data/part-1.md")]
    with FakeAnthropic() as api:
        api.responder = lambda _b: Reply(body=message_body(same, stop_reason="tool_use"))
        run_until_idle(hive, provider(api))
        requests = len(api.message_requests)

    assert STOPPED in (hive.failed_dir / "t1.md").read_text()
    assert requests == 3


def test_identical_calls_in_one_round_are_one_call(hive: Hive) -> None:
    """Ten of the same call in one reply: it runs once, each gets its answer, and it is
    no loop (each round counts a call once)."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    ping = {"to": HUMAN, "body": "ping", "task": "t1"}
    with FakeAnthropic() as api:
        api.responder = scripted(
            [tool_use(n, "send_message", **ping) for n in range(10)],
            [tool_use(10, "complete_task", task_id="t1", result="pinged")],
        )
        run_until_idle(hive, provider(api))

    pings = [i for i in Mailbox(hive, HUMAN).unread() if i.message.body == "ping"]
    assert len(pings) == 1
    assert ended(hive) == ({"t1"}, set())
    record = cycles(hive)[0]
    results = [c["result"] for c in record["tool_calls"][:10]]
    assert all(r.startswith(f"delivered to {HUMAN}") for r in results)
