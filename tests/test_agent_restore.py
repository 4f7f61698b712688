"""A restarted agent takes up its tasks where it left them: the steps it took for the
tasks it still holds come back from its audit log (real SDK, fake Messages API)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from hivemind.agent.audit import AuditLog
from hivemind.agent.cycle import Agent
from hivemind.agent.inspect import inspect_agent
from hivemind.agent.record import CycleRecord
from hivemind.agent.restore import HISTORY_MAX_AGE, restore_history
from hivemind.agent.services import HiveServices
from hivemind.clock import utcnow
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.llm.offline import OfflineProvider
from hivemind.memory.blocks import BlockType, ContextBlock, HistoryBlock
from hivemind.memory.earlier import EARLIER_ID
from hivemind.memory.manager import WorkingMemoryManager
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import fast_config, run_until_idle, write_agent, write_task
from tests.scripted_model import provider, scripted, tool_use
from tests.test_agent_memory_life import AGENT, Life

DECISION = "DECISION: we use postgres 16 for the ledger"


def context_of(body: Any) -> str:
    """The JSON context of a request (its first user turn), as text."""
    return json.dumps(body["messages"][0]["content"])


def first_run(hive: Hive) -> None:
    """The worker takes t1 a few steps on, without finishing it."""
    write_agent(hive, "worker")
    write_task(hive, "t1", "Design the ledger's storage.")
    with FakeAnthropic() as api:
        api.responder = scripted([
            tool_use(1, "write_file", path="workspace/t1-notes.md", content=DECISION),
            tool_use(2, "send_message", to=HUMAN, body="I chose postgres 16", task="t1"),
        ])
        run_until_idle(hive, provider(api))
    assert (hive.active_dir_for("worker") / "t1.md").is_file()


def test_after_a_restart_the_model_sees_the_steps_of_the_task_it_holds(hive: Hive) -> None:
    """Working memory lived in the process only: after a restart the agent was on its
    task with no record of what it had done for it."""
    first_run(hive)
    PostOffice(hive).send(HUMAN, "worker", "re: ledger", "Why that database?")

    with FakeAnthropic() as api:
        api.responder = scripted()
        run_until_idle(hive, provider(api))
        context = context_of(api.message_requests[0].body)

    assert "workspace/t1-notes.md" in context
    assert "I chose postgres 16" in context


def test_inspect_shows_the_steps_a_restarted_agent_would_see(hive: Hive) -> None:
    first_run(hive)

    report = asyncio.run(inspect_agent(hive, "worker"))

    kept = [row["id"] for row in report["blocks"] if row["kept"]]
    assert any(":write_file" in block_id for block_id in kept)
    assert any(":send_message" in block_id for block_id in kept)


# -- what comes back is what a live agent still holds -----------------------------


@pytest.fixture
def api() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


def history(working: WorkingMemoryManager) -> list[HistoryBlock]:
    return [b for b in working.by_type(BlockType.HISTORY) if isinstance(b, HistoryBlock)]


def restarted(hive: Hive) -> Agent:
    """The agent of a new process, its memory recovered from the audit log."""
    agent = Agent(AGENT, HiveServices.open(hive, OfflineProvider(), fast_config(hive)))
    agent.recover()
    return agent


async def test_steps_of_a_task_finished_beside_a_held_one_do_not_come_back(
    hive: Hive, api: FakeAnthropic
) -> None:
    """They came back filed under the task still held: cut to the held tasks first, a
    call for the finished one named none of them and fell back to "every task"."""
    life = Life(hive, api)
    life.task("t1")
    life.task("t2")
    life.mail("go")
    await life.cycle([
        life.call("write_file", path="workspace/t1-out.md", content="answer for t1"),
        life.call("complete_task", task_id="t1", result="answer for t1"),
    ])
    assert [b.action for b in history(life.agent.working)] == ["said"]

    restored = history(restarted(hive).working)

    assert [(b.action, b.metadata["task_ids"]) for b in restored] == [("said", ["t2"])]


async def test_a_failed_attempt_does_not_come_back_when_the_task_is_taken_again(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    write_task(hive, "t1", "Do it.", front="max_attempts: 3\n")
    board = life.services.board
    assert board.claim(next(r for r in board.scan_pending() if r.path.stem == "t1"), AGENT)
    life.mail("go")
    await life.cycle([
        life.call("write_file", path="workspace/t1-try1.md", content="wrong approach"),
        life.call("fail_task", task_id="t1", reason="wrong approach, retry"),
    ])
    assert board.claim(next(r for r in board.scan_pending() if r.task.id == "t1"), AGENT)

    restored = history(restarted(hive).working)

    assert not any("try1" in b.detail for b in restored), [b.detail for b in restored]
    assert history(life.agent.working) == []  # the live agent holds none either


async def test_steps_the_janitor_would_have_swept_do_not_come_back(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    life.task("t1")
    life.mail("go")
    await life.cycle([life.call("write_file", path="workspace/t1-notes.md", content="x")])
    path = hive.audit_path(AGENT)
    long_ago = (utcnow() - HISTORY_MAX_AGE - timedelta(minutes=5)).isoformat()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**rec, "at": long_ago}) + "\n" for rec in lines))

    assert history(restarted(hive).working) == []


async def test_a_restored_step_keeps_the_time_it_was_taken(
    hive: Hive, api: FakeAnthropic
) -> None:
    """It was stamped with the restart's time: the janitor kept it an hour more."""
    life = Life(hive, api)
    life.task("t1")
    life.mail("go")
    await life.cycle([life.call("write_file", path="workspace/t1-notes.md", content="x")])
    path = hive.audit_path(AGENT)
    earlier = utcnow() - timedelta(minutes=50)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**rec, "at": earlier.isoformat()}) + "\n"
                            for rec in lines))

    restored = history(restarted(hive).working)

    assert [b.action for b in restored] == ["write_file", "said"]
    assert {b.timestamp for b in restored} == {earlier}


def cycle_record(log: AuditLog, n: int, tasks: list[str], path: str,
                 ended: tuple[str, ...] = ()) -> None:
    log.write(CycleRecord(cycle=n, tasks=tasks, text="",
              tool_calls=[{"name": "write_file", "input": {"path": path},
                           "result": "written", "error": False}],
              effects={"tasks_completed": list(ended), "tasks_failed": []}))


def test_a_long_log_keeps_the_steps_of_a_held_task_behind_those_of_one_that_ended(
    hive: Hive,
) -> None:
    """Bounding the memory of a long read must not lose the held task's older steps
    to a burst of newer steps of a task that ends after them."""
    log = AuditLog(hive.audit_path(AGENT), fsync=False)
    for n in range(5):
        cycle_record(log, n, ["t1", "t2"], f"workspace/t1/step{n}.md")
    for n in range(5, 200):
        cycle_record(log, n, ["t1", "t2"], f"workspace/t2/step{n}.md")
    cycle_record(log, 200, ["t1", "t2"], "workspace/t2/last.md", ended=("t2",))
    working = WorkingMemoryManager()

    # t2 failed there and was taken up again: its steps before are gone, t1's are not
    assert restore_history(log, ["t1", "t2"], working, limit=3) == 3

    assert [b.detail for b in history(working)] == [
        json.dumps({"path": f"workspace/t1/step{n}.md"}, separators=(",", ":")) for n in (2, 3, 4)
    ]


def test_a_record_whose_time_is_unreadable_is_not_restored(hive: Hive) -> None:
    log = AuditLog(hive.audit_path(AGENT), fsync=False)
    cycle_record(log, 1, ["t1"], "workspace/t1-a.md")
    path = hive.audit_path(AGENT)
    rec = json.loads(path.read_text())
    path.write_text(json.dumps({**rec, "at": "yesterday"}) + "\n")
    cycle_record(log, 2, ["t1"], "workspace/t1-b.md")
    working = WorkingMemoryManager()

    restore_history(log, ["t1"], working, limit=10, now=utcnow())

    assert [b.metadata["cycle"] for b in history(working)] == [2]


def restored_steps(hive: Hive, steps: int, limit: int) -> tuple[WorkingMemoryManager, list[str]]:
    """Working memory after a restart from a log of `steps` steps of t1, one a cycle,
    and the lines of its earlier steps."""
    log = AuditLog(hive.audit_path(AGENT), fsync=False)
    for n in range(steps):
        cycle_record(log, n, ["t1"], f"workspace/step{n}.md")
    working = WorkingMemoryManager()
    assert restore_history(log, ["t1"], working, limit=limit) == limit
    earlier = working.get(EARLIER_ID)
    assert isinstance(earlier, ContextBlock)
    return working, earlier.summary.splitlines()[1:]


def test_steps_older_than_the_newest_come_back_as_earlier_steps(hive: Hive) -> None:
    """As the janitor leaves them live: the newest whole, the older a line each."""
    working, lines = restored_steps(hive, 8, limit=3)

    assert [b.detail for b in history(working)] == [
        json.dumps({"path": f"workspace/step{n}.md"}, separators=(",", ":")) for n in (5, 6, 7)
    ]
    assert len(lines) == 5 and all(ln.startswith("- [t1] write_file: ") for ln in lines)
    assert "step0.md" in lines[0] and "step4.md" in lines[-1]


def test_a_long_log_restores_a_tasks_first_steps_and_counts_those_between(hive: Hive) -> None:
    _, lines = restored_steps(hive, 300, limit=3)

    assert "step0.md" in lines[0] and "step7.md" in lines[7]
    [marker] = [ln for ln in lines if "more steps" in ln]
    shown = len(lines) - 1
    assert marker == f"- [t1] [… {300 - 3 - shown} more steps …]"
    assert "step296.md" in lines[-1]  # the newest three came back whole


def test_a_step_older_than_an_hour_comes_back_as_an_earlier_step(hive: Hive) -> None:
    log = AuditLog(hive.audit_path(AGENT), fsync=False)
    cycle_record(log, 1, ["t1"], "workspace/old.md")
    cycle_record(log, 2, ["t1"], "workspace/new.md")
    working = WorkingMemoryManager()
    later = utcnow() + HISTORY_MAX_AGE  # the first record is past the hour by then...

    restore_history(log, ["t1"], working, limit=3, now=later + timedelta(seconds=1))

    assert history(working) == []  # ...and so is the second
    earlier = working.get(EARLIER_ID)
    assert isinstance(earlier, ContextBlock)
    assert ["old.md" in ln for ln in earlier.summary.splitlines()[1:]] == [True, False]
