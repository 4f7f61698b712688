"""Agents that leave and come back while the daemon runs, and --max-cycles as a cap
(offline provider, real temporary hives)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter

import pytest

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.errors import ModelConnectionError
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.llm.base import ModelRequest, ModelResponse
from tests.helpers import (
    CountingProvider,
    fast_config,
    run_until_idle,
    until,
    write_agent,
    write_task,
)


class FailsFor(CountingProvider):
    """The offline provider, but every call of `agent` fails (a model that is away)."""

    def __init__(self, agent: str) -> None:
        super().__init__()
        self.agent = agent
        self.failed = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent == self.agent:
            self.failed += 1
            raise ModelConnectionError("the model is away (test)")
        return await super().complete(request)


class HeldOnce(CountingProvider):
    """The offline provider; `agent`'s first call waits for `gate`. Counts the calls
    of each agent in flight at once (`most`)."""

    def __init__(self, agent: str) -> None:
        super().__init__()
        self.agent = agent
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self.in_flight: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        who = request.agent
        self.calls[who] += 1
        self.in_flight[who] += 1
        self.most[who] = max(self.most[who], self.in_flight[who])
        try:
            if who == self.agent and self.calls[who] == 1:
                self.waiting.set()
                await self.gate.wait()
            return await super().complete(request)
        finally:
            self.in_flight[who] -= 1


def test_an_agent_removed_in_its_back_off_gives_its_tasks_back_at_once(hive: Hive) -> None:
    """Its back-off waited for the daemon's stop only: the tasks it held stayed in
    tasks/active/ until then, and --until-idle called the hive idle (exit 0) with them
    undone: they went back to tasks/ as the daemon exited, for nobody."""
    write_agent(hive, "stays")
    write_agent(hive, "leaves", front="skills: [refunds]\n")  # routed to it by skill
    for i in range(3):
        write_task(hive, f"t{i}", "Process the refunds.")
    provider = FailsFor("leaves")
    daemon = Daemon(hive, fast_config(hive), provider,
                    RunOptions(until_idle=True, idle_settle=0.2, backoff=60.0))

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        await until(lambda: provider.failed > 0, "its first call failed")
        shutil.rmtree(hive.agent_dir("leaves"))
        await asyncio.wait_for(task, 20)

    asyncio.run(main())
    assert daemon.exit_reason == "idle"
    for i in range(3):
        assert "agent: stays" in (hive.done_dir / f"t{i}.md").read_text()
    assert list(hive.tasks_dir.glob("*.md")) == []


def test_an_agent_put_back_during_its_cycle_never_runs_two_cycles_at_once(hive: Hive) -> None:
    """Its folder moved away and back while a cycle was in flight: a new runner started
    at once beside the old one, marked the old cycle interrupted while it still ran, and
    did its tasks a second time (two reports to human)."""
    write_agent(hive, "worker")
    write_task(hive, "t1", front="assignee: worker\n")
    provider = HeldOnce("worker")
    daemon = Daemon(hive, fast_config(hive), provider, RunOptions())
    away = hive.root.parent / "worker-away"

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        await asyncio.wait_for(provider.waiting.wait(), 10)
        hive.agent_dir("worker").rename(away)
        await until(lambda: "worker" not in daemon.runners, "its runner stops")
        away.rename(hive.agent_dir("worker"))
        await asyncio.sleep(1.0)  # the watcher hears of it (rescan 0.2 s)
        calls_while_held = provider.calls["worker"]
        provider.gate.set()
        await until((hive.done_dir / "t1.md").exists, "the task is done")
        await until(lambda: "worker" in daemon.runners, "it runs again")
        daemon.stop("test")
        await task
        assert calls_while_held == 1

    asyncio.run(main())
    assert provider.most["worker"] == 1
    events = [json.loads(line)["event"]
              for line in hive.audit_path("worker").read_text().splitlines()]
    assert "interrupted" not in events
    reports = [p for p in (hive.mailboxes_dir / "human" / "new").glob("*.md")
               if "t1" in p.read_text()]
    assert len(reports) == 1


def slow_agents_daemon(hive: Hive, grace: float) -> tuple[Daemon, HeldOnce]:
    """A daemon whose agent `slow` holds task t1 and whose model call for it is held
    (until the test ends), with a grace period of `grace` seconds."""
    write_agent(hive, "slow")
    write_task(hive, "t1", front="assignee: slow\n")
    provider = HeldOnce("slow")
    config = fast_config(hive)
    config.daemon.grace_period = grace
    return Daemon(hive, config, provider, RunOptions()), provider


def test_an_agent_added_while_the_daemon_stops_is_not_started_and_the_stop_ends(
    hive: Hive,
) -> None:
    """Its runner started after the stop had taken the others': nothing stopped it, and
    the stop waited for it for ever (a second Ctrl-C too)."""
    grace = 2.0
    daemon, provider = slow_agents_daemon(hive, grace)  # the stop waits out the grace

    async def main() -> bool:
        task = asyncio.create_task(daemon.run())
        await asyncio.wait_for(provider.waiting.wait(), 10)
        daemon.stop("signal")
        write_agent(hive, "newbie")  # the watcher hears of it within the grace period
        done, _ = await asyncio.wait([task], timeout=grace + 10)
        if not done:  # end it, for the test to fail rather than hang
            for runner in daemon.runners.values():
                runner.stop = True
                runner.wake.set()
            await asyncio.wait_for(task, 10)
        return bool(done)

    assert asyncio.run(main()), "the stop never ended"
    assert daemon.exit_reason == "signal"
    assert "newbie" not in daemon.runners
    assert not hive.audit_path("newbie").exists()  # it ran no cycle


def test_a_stop_cuts_the_cycle_of_an_agent_removed_mid_cycle_at_the_grace_period(
    hive: Hive,
) -> None:
    """Its runner had left `runners` when the stop came: its cycle was never cut, and
    the stop waited for its model call however long it took."""
    grace = 2.0
    daemon, provider = slow_agents_daemon(hive, grace)

    async def main() -> bool:
        task = asyncio.create_task(daemon.run())
        await asyncio.wait_for(provider.waiting.wait(), 10)
        shutil.rmtree(hive.agent_dir("slow"))
        await until(lambda: "slow" not in daemon.runners, "its runner is told to stop")
        daemon.stop("signal")
        done, _ = await asyncio.wait([task], timeout=grace + 10)
        provider.gate.set()  # (for the test to fail rather than hang)
        await asyncio.wait_for(task, 10)
        return bool(done)

    assert asyncio.run(main()), "the stop waited for the removed agent's cycle"
    assert daemon.exit_reason == "signal"


def test_max_cycles_is_a_cap_however_many_agents_run_at_once(hive: Hive) -> None:
    """Each agent's cycle in flight ran to its end: --max-cycles 2 with six agents ran
    six cycles (each one may cost tokens)."""
    for i in range(6):
        write_agent(hive, f"a{i}")
    for i in range(12):
        write_task(hive, f"t{i:02d}")
    provider = CountingProvider()

    daemon = run_until_idle(hive, provider, max_cycles=2)

    assert daemon.exit_reason == "max-cycles"
    assert daemon.totals.cycles == 2
    assert len({r.agent for r in provider.requests}) <= 2



def test_an_agent_folder_named_human_is_not_run(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    """agents/human/ was taken for an agent: it read the person's mail (marked read,
    answered by a model) and could be routed tasks."""
    write_agent(hive, "worker")
    write_agent(hive, HUMAN)
    write_task(hive, "t1")

    daemon = run_until_idle(hive)

    assert set(daemon.runners) == {"worker"}
    assert "agent: worker" in (hive.done_dir / "t1.md").read_text()
    assert len(Mailbox(hive, HUMAN).unread()) >= 1  # the worker's notes, still unread
    assert "agents/human/: not run as an agent: `human` is the person's name" in caplog.text
