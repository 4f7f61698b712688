"""The context tells the truth: the hive figures an agent is shown include the claims
made for it, and at start-up no agent is woken for its mail before the pending tasks
are claimed (one cycle sees both, not two)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.llm.base import ModelRequest
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import (
    CountingProvider,
    fast_config,
    run_until_idle,
    until,
    write_agent,
    write_task,
)

KEY = "sk-ant-context-truth-test"


def hive_figures(request: ModelRequest) -> dict[str, Any]:
    """The `status:hive` entry of a request's context: the tasks per state."""
    entries = json.loads(request.context_stable + request.context_volatile)
    [status] = [e for e in entries if e["id"] == "status:hive"]
    tasks: dict[str, Any] = json.loads(status["content"])["tasks"]
    return {state: tasks.get(state, 0) for state in ("active", "pending", "done", "failed")}


def first_cycle(hive: Hive, agent: str) -> dict[str, Any]:
    for line in hive.audit_path(agent).read_text().splitlines():
        record: dict[str, Any] = json.loads(line)
        if record["event"] == "cycle_start":
            return record
    raise AssertionError("no cycle")


def test_at_start_up_one_cycle_sees_the_mail_and_the_claimed_task(hive: Hive) -> None:
    """The agent woke for its mail before the pending task was claimed: one more call of
    the whole context (3 of 3 tries), and a status entry of `active: 0, pending: 1`."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    PostOffice(hive).send(HUMAN, "worker", "hello", "Are you there?")
    provider = CountingProvider()

    run_until_idle(hive, provider)

    start = first_cycle(hive, "worker")
    assert start["tasks"] == ["t1"] and len(start["mail"]) == 1
    first = provider.requests[0]
    assert first.agent == "worker"
    figures = hive_figures(first)
    assert (figures["pending"], figures["active"]) == (0, 1)


def test_the_figures_include_the_claim_made_just_before_the_cycle(hive: Hive) -> None:
    """Counts were cached for 2 s: the cycle for a task claimed right after another ended
    was shown the board as it was before (t1 still active, nothing done)."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    provider = CountingProvider()

    async def main() -> None:
        daemon = Daemon(hive, fast_config(hive), provider, RunOptions())
        running = asyncio.create_task(daemon.run())
        await until((hive.done_dir / "t1.md").is_file, "t1 is done")
        write_task(hive, "t2")
        await until((hive.done_dir / "t2.md").is_file, "t2 is done")
        daemon.stop("test")
        await running

    asyncio.run(main())

    for_t2 = next(r for r in provider.requests if "task:t2" in r.context_ids)
    figures = hive_figures(for_t2)
    assert (figures["pending"], figures["active"], figures["done"]) == (0, 1, 1)


def test_a_worker_process_shows_the_claim_the_lead_made_for_it(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --workers the lead claims, and the worker process cached the figures it
    had: its agent was shown the board as it was before the claim."""
    write_agent(hive, "ann")
    write_agent(hive, "bob")  # dealt to the worker process (the lead keeps ann)
    write_task(hive, "t1", front="assignee: bob\n")

    async def main(api: FakeAnthropic) -> Daemon:
        daemon = Daemon(hive, fast_config(hive), scripted_model.provider(api, KEY),
                        RunOptions(workers=2))
        running = asyncio.create_task(daemon.run())
        await until((hive.done_dir / "t1.md").is_file, "t1 is done")
        write_task(hive, "t2", front="assignee: bob\n")
        await until((hive.done_dir / "t2.md").is_file, "t2 is done")
        daemon.stop("test")
        await running
        return daemon

    with FakeAnthropic() as api:
        api.responder = scripted_model.task_completer
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # for the worker's own provider
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        daemon = asyncio.run(main(api))
        bodies = [r.body for r in api.message_requests]

    assert daemon.runners["bob"].worker is not None
    for_t2 = next(b for b in bodies if scripted_model.active_tasks(b) == ["t2"])
    [status] = [e for e in scripted_model.context_entries(for_t2) if e["id"] == "status:hive"]
    figures = json.loads(status["content"])["tasks"]  # a state with no task is left out
    assert (figures.get("pending", 0), figures["active"], figures["done"]) == (0, 1, 1)
