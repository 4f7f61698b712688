"""A restarted agent takes up its tasks where it left them: the steps it took for the
tasks it still holds come back from its audit log (real SDK, fake Messages API)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hivemind.agent.inspect import inspect_agent
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import provider, scripted, tool_use

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
