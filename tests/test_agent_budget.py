"""Token budgets (ROM `budget`, hive.toml `[agents]` defaults), through real cycles.

The contract: tokens per agent per day and per task; when spent, the agent pauses
and tells `human` once. A task over its budget goes to tasks/failed/; an agent over
its day makes no model call until the next UTC day, and its tasks stay where they are.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hivemind.agent.budget import BudgetTracker, start_of_day
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.llm.base import Provider
from hivemind.settings import TokenBudget
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import (
    CountingProvider,
    fast_config,
    run_until_idle,
    until,
    write_agent,
    write_task,
)
from tests.scripted_model import active_tasks, is_first_round, provider

WAIT = 20.0  # s: generous; every wait ends as soon as its condition holds
QUIET = 0.6  # s of heartbeats (every 0.05 s) in which nothing more may happen
HEARTBEAT = "heartbeat: 0.05\n"
PER_CALL = {"input_tokens": 300, "output_tokens": 100}  # 400 tokens a model call


# -- helpers ------------------------------------------------------------------------------


def human_subjects(hive: Hive) -> list[str]:
    return [item.message.subject for item in Mailbox(hive, HUMAN).unread()]


def budget_notes(hive: Hive) -> list[str]:
    return [s for s in human_subjects(hive) if s.startswith("[budget]")]


def where(hive: Hive, task_id: str) -> str:
    """The folder of tasks/ that holds the task, relative to the hive root."""
    [path] = [p for p in hive.tasks_dir.rglob(f"{task_id}.md")]
    return hive.relative(path.parent)


def cycle_records(hive: Hive, agent: str) -> list[dict[str, Any]]:
    lines = hive.audit_path(agent).read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "cycle"]


@asynccontextmanager
async def running(hive: Hive, provider: Provider) -> AsyncIterator[Daemon]:
    """A daemon running on `hive` (no --until-idle) while the block runs; then stopped."""
    daemon = Daemon(hive, fast_config(hive), provider, RunOptions())
    task = asyncio.create_task(daemon.run())
    try:
        yield daemon
    finally:
        daemon.stop("test")
        await asyncio.wait_for(task, WAIT)


def settled(daemon: Daemon) -> bool:
    """No cycle in flight and none asked for."""
    return not any(r.busy or r.wake.is_set() for r in daemon.runners.values())


def text_reply(text: str) -> Reply:
    return Reply(body=message_body([{"type": "text", "text": text}], usage=PER_CALL))


PROGRESS = "workspace/progress.md"
WATCHES_ITS_NOTES = f"watch: [{PROGRESS}]\n"
"""A ROM line: the agent wakes when its own progress note changes (it may not mail
itself: that would wake it for ever)."""


def plodder(wakes_itself: bool) -> Callable[[Any], Reply]:
    """A model that works on its task without ever finishing it: each cycle it writes a
    progress note (to a file its ROM watches, which wakes it again, or to human), then
    ends its turn. Every call costs PER_CALL tokens."""
    notes = iter(range(1, 1_000))

    def reply(body: Any) -> Reply:
        tasks = active_tasks(body)
        if not is_first_round(body) or not tasks:
            return text_reply("nothing more for now")
        note = f"still working on {tasks[0]}"
        if wakes_itself:
            call = {"type": "tool_use", "id": "toolu_1", "name": "write_file",
                    "input": {"path": PROGRESS, "content": f"{next(notes)}: {note}\n"}}
        else:
            call = {"type": "tool_use", "id": "toolu_1", "name": "send_message",
                    "input": {"to": HUMAN, "subject": "progress", "body": note,
                              "task": tasks[0]}}
        return Reply(body=message_body([call], stop_reason="tool_use", usage=PER_CALL))

    return reply


# -- per task -----------------------------------------------------------------------------


async def t1_stopped_by_its_budget(hive: Hive, daemon: Daemon) -> None:
    """Wait until t1 is failed and the agent is quiet again."""
    await until((hive.failed_dir / "t1.md").exists, "t1 is failed")
    await until(lambda: settled(daemon), "the agent is quiet")


async def test_a_task_over_its_budget_fails_and_human_is_told_once(hive: Hive) -> None:
    # Each cycle on t1 costs 2 calls x 400 = 800 tokens, over the 500 allowed: the cycle
    # after the first (woken by the model's own note) must stop t1, not work on it.
    write_agent(hive, "worker",
                front=f"budget: {{per_task: 500}}\n{HEARTBEAT}{WATCHES_ITS_NOTES}")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = plodder(wakes_itself=True)
        async with running(hive, provider(api)) as daemon:
            await t1_stopped_by_its_budget(hive, daemon)
            # More cycles after the stop: mail from human, and heartbeats.
            PostOffice(hive).send(HUMAN, "worker", "status?", "How is it going?")
            await until(lambda: not Mailbox(hive, "worker").unread() and settled(daemon),
                        "human's mail is answered")
            await asyncio.sleep(QUIET)
        bodies = [r.body for r in api.message_requests]

    failed = (hive.failed_dir / "t1.md").read_text()
    assert "token budget per task spent (800 tokens)" in failed
    assert "status: failed" in failed
    assert daemon.totals.tasks_failed == 1  # in the run's figures (it was 0)
    assert budget_notes(hive) == ["[budget] task t1 stopped"]
    [note] = [i.message for i in Mailbox(hive, HUMAN).unread() if i.message.subject.startswith(
        "[budget]")]
    assert note.from_ == "worker"
    assert "over the per-task budget of 500" in note.body and "tasks/failed/" in note.body
    # Only the first cycle's two calls were charged to t1: it was stopped before a third.
    charged = [r for r in cycle_records(hive, "worker") if "t1" in r["tasks"]]
    assert len(charged) == 1 and charged[0]["usage"]["input_tokens"] == 600
    # The agent is not paused: it went on to answer human's mail after the stop.
    assert "status?" in json.dumps(bodies[-1])
    assert Mailbox(hive, "worker").unread() == []


async def t2_arrives_after_t1_spent_its_budget(hive: Hive) -> list[dict[str, Any]]:
    """t1 (per-task budget 500) has one cycle of 800 tokens; then t2 is dropped, and the
    next cycle stops t1 and works on t2. The model's requests."""
    write_agent(hive, "worker", front="budget: {per_task: 500}\n")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = plodder(wakes_itself=False)
        async with running(hive, provider(api)) as daemon:
            await until(lambda: len(api.message_requests) == 2 and settled(daemon),
                        "t1's first cycle has ended")
            assert where(hive, "t1") == "tasks/active/worker"  # 800 tokens, not stopped yet
            write_task(hive, "t2")  # new input: the next cycle stops t1 and works on t2
            await until((hive.failed_dir / "t1.md").exists, "t1 is failed")
            await until(lambda: len(api.message_requests) == 4 and settled(daemon),
                        "t2's first cycle has ended")
        return [r.body for r in api.message_requests]


async def test_a_spent_task_is_stopped_while_the_agents_other_task_goes_on(hive: Hive) -> None:
    bodies = await t2_arrives_after_t1_spent_its_budget(hive)

    assert [active_tasks(b) for b in bodies[:2]] == [["t1"], ["t1"]]
    assert "t2" in active_tasks(bodies[2])  # worked on in the cycle that stopped t1
    assert where(hive, "t2") == "tasks/active/worker"
    assert budget_notes(hive) == ["[budget] task t1 stopped"]
    [_, second] = cycle_records(hive, "worker")
    assert second["tasks"] == ["t2"]  # its tokens are t2's, not the stopped t1's


async def test_a_task_stopped_by_its_budget_is_not_shown_to_the_model_as_active(
    hive: Hive,
) -> None:
    bodies = await t2_arrives_after_t1_spent_its_budget(hive)

    assert [active_tasks(b) for b in bodies[2:]] == [["t2"], ["t2"]]
    progress = [i.message.body for i in Mailbox(hive, HUMAN).unread()
                if i.message.subject == "progress"]
    assert progress == ["still working on t1", "still working on t2"]  # not t1 after its stop


async def test_status_does_not_call_an_agent_paused_for_one_stopped_task(hive: Hive) -> None:
    write_agent(hive, "worker", front=f"budget: {{per_task: 500}}\n{WATCHES_ITS_NOTES}")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = plodder(wakes_itself=True)
        async with running(hive, provider(api)) as daemon:
            await t1_stopped_by_its_budget(hive, daemon)

    status = json.loads(hive.status_file.read_text())
    assert status["agents"]["worker"]["state"] == "idle"


def test_a_task_budget_spent_before_a_restart_stops_the_task_at_once(hive: Hive) -> None:
    write_agent(hive, "worker", front="budget: {per_task: 500}\n")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = plodder(wakes_itself=False)
        run_until_idle(hive, provider(api), max_cycles=1)
        assert len(api.message_requests) == 2
    assert where(hive, "t1") == "tasks/active/worker"  # 800 tokens spent on it

    counting = CountingProvider()
    run_until_idle(hive, counting)

    assert counting.requests == []  # not one more token on t1
    assert "token budget per task spent (800 tokens)" in (hive.failed_dir / "t1.md").read_text()
    assert budget_notes(hive) == ["[budget] task t1 stopped"]


# -- per day ------------------------------------------------------------------------------


async def test_an_agent_over_its_day_stops_calling_the_model_and_gives_back_its_tasks(
    hive: Hive,
) -> None:
    write_agent(hive, "worker", front=f"budget: {{per_day: 1}}\n{HEARTBEAT}")
    write_task(hive, "t1")
    provider = CountingProvider()
    async with running(hive, provider) as daemon:
        await until(lambda: (hive.done_dir / "t1.md").exists() and settled(daemon), "t1 is done")
        calls = len(provider.requests)
        assert calls >= 1  # the day's budget was fine before this cycle: it ran
        write_task(hive, "t2")
        await until(lambda: bool(budget_notes(hive)), "human is told")
        # Later wake-ups, each new input: mail, another task, and heartbeats.
        PostOffice(hive).send(HUMAN, "worker", "hello", "Are you there?")
        write_task(hive, "t3")
        await asyncio.sleep(QUIET)
        assert len(provider.requests) == calls
        assert ("t3", "no agent is taking work: worker is paused: its daily token budget "
                "is spent") in daemon.waiting

    assert budget_notes(hive) == ["[budget] worker paused"]
    [note] = [i.message for i in Mailbox(hive, HUMAN).unread() if i.message.subject.startswith(
        "[budget]")]
    assert "daily budget of 1 tokens" in note.body
    # t2, claimed before the pause was known, is given back for other agents; t3 is not
    # claimed at all. The one agent there is paused: both wait.
    assert "Back in tasks/ for other agents: t2." in note.body
    assert where(hive, "t2") == where(hive, "t3") == "tasks"
    assert [i.message.subject for i in Mailbox(hive, "worker").unread()] == ["hello"]
    assert [r["tasks"] for r in cycle_records(hive, "worker")] == [["t1"]]  # t2: no cycle


async def test_a_paused_agent_gets_no_new_work_and_others_take_it(hive: Hive) -> None:
    write_agent(hive, "alice", front="budget: {per_day: 1}\naccepts_unassigned: true\n")
    write_agent(hive, "bob", front="accepts_unassigned: false\n")
    write_task(hive, "t1", front="assignee: alice\n")
    async with running(hive, CountingProvider()) as daemon:
        await until(lambda: (hive.done_dir / "t1.md").exists() and settled(daemon), "t1 is done")
        write_task(hive, "t2", front="assignee: alice\n")
        await until(lambda: bool(budget_notes(hive)), "alice is paused")
        write_task(hive, "for-alice", front="assignee: alice\n")
        write_task(hive, "anyone", front="assignee: nobody-by-that-name\n")
        for n in range(3):
            write_task(hive, f"skilled-{n}", front="domain: billing\n")
        (hive.rom_path("bob")).write_text(
            "---\nrole: bob\nskills: [billing]\naccepts_unassigned: true\n---\nDo tasks.\n")
        await until(lambda: len(list(hive.done_dir.glob("*.md"))) == 4 and settled(daemon),
                    "bob did the others")
        waiting = dict(daemon.waiting)

    assert {p.stem: p.read_text().count("agent: bob") for p in hive.done_dir.glob("*.md")
            if p.stem != "t1"} == {"skilled-0": 1, "skilled-1": 1, "skilled-2": 1}
    assert waiting["for-alice"] == (
        "assigned to alice, which is paused: its daily token budget is spent")
    assert where(hive, "for-alice") == "tasks"
    # A name the hive has no agent for: it waits for that agent, not given to bob.
    assert waiting["anyone"].startswith("assigned to nobody-by-that-name, which is no agent")
    assert where(hive, "anyone") == "tasks"


async def test_a_paused_agent_gives_back_the_tasks_others_can_do(hive: Hive) -> None:
    """Claimed before the pause was known: unassigned work goes to another agent today;
    work assigned to the paused agent stays with it."""
    write_agent(hive, "alice", front="budget: {per_day: 1}\n")
    write_agent(hive, "bob", front="accepts_unassigned: false\n")
    write_task(hive, "t1", front="assignee: alice\n")
    async with running(hive, CountingProvider()) as daemon:
        await until(lambda: (hive.done_dir / "t1.md").exists() and settled(daemon), "t1 is done")
        write_task(hive, "mine", front="assignee: alice\n")
        write_task(hive, "anyones")  # only alice accepts unassigned work: she claims it
        await until(lambda: bool(budget_notes(hive)), "alice is paused")
        (hive.rom_path("bob")).write_text("---\nrole: bob\n---\nDo tasks.\n")  # now he may
        await until(lambda: (hive.done_dir / "anyones.md").exists() and settled(daemon),
                    "bob did it")

    assert "agent: bob" in (hive.done_dir / "anyones.md").read_text()
    assert where(hive, "mine") == "tasks/active/alice"


def test_a_day_budget_from_hive_toml_survives_a_restart(hive: Hive) -> None:
    hive.config_file.write_text("[agents]\nbudget = {per_day = 1}\n")
    write_agent(hive, "worker")
    write_task(hive, "t1")
    first = CountingProvider()
    run_until_idle(hive, first)
    assert (hive.done_dir / "t1.md").exists() and first.requests

    write_task(hive, "t2")
    provider = CountingProvider()
    run_until_idle(hive, provider)  # stops "stalled": t2 waits for tomorrow

    assert provider.requests == []
    assert where(hive, "t2") == "tasks"  # claimed at the start, given back when paused
    assert budget_notes(hive) == ["[budget] worker paused"]


def test_human_is_not_told_again_that_an_agent_is_paused_after_a_restart(hive: Hive) -> None:
    write_agent(hive, "worker", front="budget: {per_day: 1}\n")
    write_task(hive, "t1")
    run_until_idle(hive)
    write_task(hive, "t2")
    run_until_idle(hive)  # paused: human is told
    assert budget_notes(hive) == ["[budget] worker paused"]

    PostOffice(hive).send(HUMAN, "worker", "hello", "Still paused?")
    provider = CountingProvider()
    run_until_idle(hive, provider)  # the same day, a new daemon (e.g. a cron'd --until-idle)

    assert provider.requests == []
    assert budget_notes(hive) == ["[budget] worker paused"]


def test_yesterdays_spending_does_not_pause_the_agent_today(hive: Hive) -> None:
    write_agent(hive, "worker", front="budget: {per_day: 1}\n")
    write_task(hive, "t1")
    run_until_idle(hive)
    # The day is over: the audit log's records are from yesterday.
    yesterday = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    log = hive.audit_path("worker")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    log.write_text("".join(json.dumps({**r, "at": yesterday}) + "\n" for r in records))

    write_task(hive, "t2")
    provider = CountingProvider()
    run_until_idle(hive, provider)

    assert provider.requests
    assert (hive.done_dir / "t2.md").exists()
    assert budget_notes(hive) == []


# -- only when there is something to do ---------------------------------------------------


async def test_an_idle_agent_with_a_spent_budget_sends_nothing(hive: Hive) -> None:
    write_agent(hive, "worker", front=f"budget: {{per_day: 1, per_task: 1}}\n{HEARTBEAT}")
    write_task(hive, "t1")
    provider = CountingProvider()
    async with running(hive, provider) as daemon:
        await until(lambda: (hive.done_dir / "t1.md").exists() and settled(daemon), "t1 is done")
        calls = len(provider.requests)
        await asyncio.sleep(QUIET)  # heartbeats, nothing to do
        assert len(provider.requests) == calls
    # A restart finds the day spent, and still nothing to do.
    restarted = CountingProvider()
    async with running(hive, restarted) as daemon:
        await until(lambda: bool(daemon.runners) and settled(daemon), "the agent is up")
        await asyncio.sleep(QUIET)

    assert restarted.requests == []
    assert budget_notes(hive) == []
    assert human_subjects(hive) == ["[offline] Ack: t1"]


# -- the tracker --------------------------------------------------------------------------

DAY = datetime(2026, 3, 14, 23, 59, tzinfo=UTC)
NEXT_DAY = datetime(2026, 3, 15, 0, 1, tzinfo=UTC)


def test_a_new_utc_day_resets_the_day_budget_but_not_the_task_budgets() -> None:
    budget = TokenBudget(per_day=1000, per_task=1000)
    tracker = BudgetTracker(day=DAY.date())
    tracker.record(600, ["t1"], now=DAY)
    tracker.record(600, ["t1", "t2"], now=DAY)
    assert tracker.day_exhausted(budget, now=DAY)
    assert tracker.tasks_exhausted(budget, ["t1", "t2"]) == ["t1"]

    assert not tracker.day_exhausted(budget, now=NEXT_DAY)
    assert tracker.spent_today == 0
    assert tracker.tasks_exhausted(budget, ["t1", "t2"]) == ["t1"]  # a task's budget is its own
    tracker.record(999, [], now=NEXT_DAY)
    assert not tracker.day_exhausted(budget, now=NEXT_DAY)
    tracker.record(1, [], now=NEXT_DAY)
    assert tracker.day_exhausted(budget, now=NEXT_DAY)


def test_a_new_day_lets_human_be_told_again_but_a_stopped_task_only_once() -> None:
    tracker = BudgetTracker(day=DAY.date())
    assert tracker.first_warning(f"day:{DAY.date()}")
    assert tracker.first_warning("task:t1")
    assert not tracker.first_warning(f"day:{DAY.date()}")
    assert not tracker.first_warning("task:t1")

    tracker.day_exhausted(TokenBudget(per_day=5), now=NEXT_DAY)
    assert tracker.first_warning(f"day:{NEXT_DAY.date()}")
    assert not tracker.first_warning("task:t1")


def test_no_budget_is_never_exhausted() -> None:
    tracker = BudgetTracker(day=DAY.date())
    tracker.record(10**9, ["t1"], now=DAY)
    assert not tracker.day_exhausted(TokenBudget(), now=DAY)
    assert tracker.tasks_exhausted(TokenBudget(), ["t1"]) == []


def test_a_day_is_a_utc_day_whatever_zone_now_is_given_in() -> None:
    # 01:30 in UTC+2 on the 15th is 23:30 UTC on the 14th: still the same budget day.
    late = datetime(2026, 3, 15, 1, 30, tzinfo=timezone(timedelta(hours=2)))
    tracker = BudgetTracker(day=DAY.date())
    tracker.record(1000, [], now=DAY)
    assert tracker.day_exhausted(TokenBudget(per_day=1000), now=late)
    assert start_of_day(late) == datetime(2026, 3, 14, tzinfo=UTC)
