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
    write_agent(hive, "worker", front="max_context_tokens: 3000\nknowledge: ['*.md']\n"
                "watch: ['workspace/draft*.md']\n")
    (hive.knowledge_dir / "small.md").write_text("# Small\n\nBees make honey.\n")
    # Ten watched files of ~200 tokens: they cannot all fit in a 1,000-token context.
    for i in range(10):
        (hive.workspace_dir / f"draft{i}.md").write_text("words here. " * 60)
    write_task(hive, "t1")

    run_until_idle(hive)

    lines = hive.audit_path("worker").read_text().splitlines()
    # (The watched files may wake the agent before the task is handed to it.)
    record = next(r for r in map(json.loads, lines) if r["event"] == "cycle"
                  and "complete_task" in [c["name"] for c in r["tool_calls"]])
    kept = {k["id"]: k["tokens"] for k in record["kept"]}
    dropped = {d["id"]: d for d in record["dropped"]}
    assert "task:t1" in kept and "knowledge/small.md" in kept.keys() | dropped.keys()
    assert all(tokens > 0 for tokens in kept.values())
    drafts = [d for bid, d in dropped.items() if bid.startswith("workspace/draft")]
    assert drafts and all(d["reason"].startswith("over budget at ") and d["tokens"] > 100
                          for d in drafts)
    assert sum(kept.values()) <= record["context_tokens"] <= 3000  # plus the array's commas
    assert record["duration_ms"] > 0 and record["duration_ms"] >= record["model_ms"]
    assert [c["name"] for c in record["tool_calls"]] == [
        "send_message", "write_file", "complete_task"]
    assert all(c["result"] and c["error"] is False for c in record["tool_calls"])


# -- a task longer than the budget --------------------------------------------------


def test_a_task_longer_than_a_small_budget_is_shortened_not_dropped(hive: Hive) -> None:
    write_agent(hive, "worker", front="max_context_tokens: 8000\nmax_output_tokens: 1000\n")
    write_task(hive, "big", "FIRST-LINE-MARKER: migrate the billing tables.\n"
               + "Some detail about the step. " * 1200)  # ~31 KB, ~7k tokens

    run_until_idle(hive)

    assert (hive.done_dir / "big.md").exists()
    [record] = [r for r in map(json.loads, hive.audit_path("worker").read_text().splitlines())
                if r["event"] == "cycle"]
    kept = {k["id"]: k["tokens"] for k in record["kept"]}
    assert "task:big" in kept and kept["task:big"] < 8000 // 4
    # What the model was given: the head of the task, labelled, with a way to read it all.
    summary = (hive.workspace_dir / "big.md").read_text()
    assert "[compressed: head of tasks/active/worker/big.md" in summary
    assert "read_file reads the whole file in parts" in summary
    assert "FIRST-LINE-MARKER: migrate the billing tables." in summary


def test_a_critical_task_longer_than_the_budget_runs_instead_of_failing_every_cycle(
    hive: Hive,
) -> None:
    write_agent(hive, "worker", front="max_context_tokens: 8000\nmax_output_tokens: 1000\n")
    write_task(hive, "big", "Urgent. " + "Some detail about the step. " * 1200,
               front="priority: critical\n")
    write_task(hive, "small", "A small one.")

    run_until_idle(hive)

    assert sorted(p.name for p in hive.done_dir.glob("*.md")) == ["big.md", "small.md"]
    records = list(map(json.loads, hive.audit_path("worker").read_text().splitlines()))
    assert not [r for r in records if r["event"] == "error"]
