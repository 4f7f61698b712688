"""What a cycle leaves for the next one and for the record: its steps come back as
HISTORY in the next context, and its audit record says what was kept and dropped."""

from __future__ import annotations

import json
from typing import Any

from hivemind.agent.cycle import Agent
from hivemind.agent.services import HiveServices
from hivemind.hive.layout import HUMAN, Hive
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import fast_config, run_until_idle, write_agent, write_task
from tests.scripted_model import context_entries, provider


def answers_then_ends(body: Any) -> Reply:
    """A model that answers each new message with a note to human, then ends its turn."""
    last = body["messages"][-1]["content"]
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
        return Reply(body=message_body([{"type": "text", "text": "ok"}]))
    subject = next(e["metadata"]["subject"] for e in context_entries(body)
                   if e["metadata"].get("type") == "message" and not e["metadata"].get("read"))
    call = {"type": "tool_use", "id": "toolu_1", "name": "send_message",
            "input": {"to": HUMAN, "body": f"noted: {subject}"}}
    return Reply(body=message_body([call], stop_reason="tool_use"))


async def test_a_cycles_tool_calls_are_history_in_the_next_context(hive: Hive) -> None:
    write_agent(hive, "worker")
    with FakeAnthropic() as api:
        api.responder = answers_then_ends
        services = HiveServices.open(hive, provider(api), fast_config(hive))
        agent = Agent("worker", services)
        services.post.send(HUMAN, "worker", "alpha", "first note")
        await agent.cycle()
        services.post.send(HUMAN, "worker", "beta", "second note")
        await agent.cycle()
        second_cycle = api.message_requests[2].body

    history = [e for e in context_entries(second_cycle)
               if e["metadata"].get("type") == "history"]
    assert any("send_message" in e["content"] and "noted: alpha" in e["content"]
               for e in history), history
    assert not any("noted: beta" in e["content"] for e in history)  # not yet done


def test_the_audit_record_names_each_block_kept_and_dropped_with_its_tokens(hive: Hive) -> None:
    write_agent(hive, "worker", front="max_context_tokens: 3000\nknowledge: ['*.md']\n")
    (hive.knowledge_dir / "small.md").write_text("# Small\n\nBees make honey.\n")
    (hive.knowledge_dir / "huge.md").write_text("# Huge\n\n" + "many words here. " * 3000)
    write_task(hive, "t1")

    run_until_idle(hive)

    lines = hive.audit_path("worker").read_text().splitlines()
    [record] = [r for r in map(json.loads, lines) if r["event"] == "cycle"]
    kept = {k["id"]: k["tokens"] for k in record["kept"]}
    dropped = {d["id"]: d for d in record["dropped"]}
    assert "task:t1" in kept and "knowledge/small.md" in kept
    assert all(tokens > 0 for tokens in kept.values())
    assert "knowledge/huge.md" in dropped
    assert dropped["knowledge/huge.md"]["reason"] and dropped["knowledge/huge.md"]["tokens"] > 0
    assert sum(kept.values()) <= record["context_tokens"] <= 3000  # plus the array's commas
    assert record["duration_ms"] > 0 and record["duration_ms"] >= record["model_ms"]
    assert [c["name"] for c in record["tool_calls"]] == [
        "send_message", "write_file", "complete_task"]
    assert all(c["result"] and c["error"] is False for c in record["tool_calls"])
