"""Long-term memory inside the agent: tools, context blocks, task end, reflection, audit."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hivemind.agent.cycle import Agent
from hivemind.agent.perceive import perceive
from hivemind.agent.services import HiveServices
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.llm.base import ToolCall
from hivemind.llm.offline import OfflineProvider
from hivemind.ltm.records import MemoryKind, Tier
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.blocks import BlockType, HistoryBlock
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools import default_registry
from hivemind.tools.base import ToolContext
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import fast_config, write_agent, write_task


def claimed_ctx(hive: Hive, ltm: LongTermMemory, task_front: str = "") -> ToolContext:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Find out which bees make honey.", front=task_front)
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.scan_pending()
    claimed = board.claim(ref, "worker")
    assert claimed is not None
    return ToolContext(
        hive=hive, agent="worker", config=AgentConfig(name="worker"), board=board,
        post=PostOffice(hive), working=WorkingMemoryManager(), active_tasks={"t1": claimed},
        ltm=ltm,
    )


async def call(ctx: ToolContext, name: str, **args: object) -> str:
    result = await default_registry().execute(ctx, ToolCall(id="c", name=name, input=args))
    assert not result.is_error, result.content
    return result.content


async def test_remember_then_recall_finds_it_and_both_are_audited(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        ctx = claimed_ctx(hive, ltm, "project: apiary\n")
        out = await call(ctx, "remember", content="Honey bees make honey; bumblebees barely do.",
                         importance=0.9)
        assert "remembered" in out
        found = await call(ctx, "recall", query="which bees make honey")
    assert "Honey bees make honey" in found
    ops = [m["op"] for m in ctx.effects.memories]
    assert ops == ["remember", "recall"]
    recall_entry = ctx.effects.memories[1]
    assert recall_entry["query"] == "which bees make honey"
    assert recall_entry["results"][0]["score"] > 0


async def test_completing_a_task_clears_its_task_memory_and_promotes_what_matters(
    hive: Hive,
) -> None:
    with LongTermMemory(hive) as ltm:
        ctx = claimed_ctx(hive, ltm, "project: apiary\ndomain: bees\ntask_type: research\n")
        await call(ctx, "remember", content="scratch note", scope="task", importance=0.1)
        await call(ctx, "remember", content="Queens live five years", scope="task",
                   importance=0.9)
        await call(ctx, "complete_task", task_id="t1", result="done")
        end = next(m for m in ctx.effects.memories if m["op"] == "end_task")
        assert len(end["promoted"]) == 1 and len(end["cleared"]) == 1
        kept = ltm.backend.query({"task_id": "t1"})
        assert [r.content for r in kept] == ["Queens live five years"]
        assert kept[0].tier is Tier.PROJECT


async def test_a_proposed_preference_is_not_consolidated_at_task_end(hive: Hive) -> None:
    """A global preference waits for a person's approval; its remember call, kept in the
    task's history, became an active memory at the task's end (every agent got it)."""
    with LongTermMemory(hive) as ltm:
        ctx = claimed_ctx(hive, ltm, "project: apiary\n")
        out = await call(ctx, "remember", content="Always write dates in ISO 8601.",
                         scope="global", preference=True)
        assert out.startswith("proposed")
        for action in ("remember", "recall", "write_file"):  # as the cycle records calls
            ctx.working.add(HistoryBlock(
                action=action, detail="Always write dates in ISO 8601.", result=out,
                metadata={"task_ids": ["t1"], "importance": 0.9},
            ))
        await call(ctx, "complete_task", task_id="t1", result="done")
        active = [r.content for r in ltm.backend.query({"status": "active"})]
    assert active == ["write_file: Always write dates in ISO 8601. -> " + out]


async def test_project_memories_become_context_blocks_only_for_that_project(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Plan the honey harvest schedule.", front="project: apiary\n")
    with LongTermMemory(hive) as ltm:
        ltm.remember("The honey harvest is in late August.", agent="x", scope="project",
                     project="apiary", importance=0.8)
        ltm.remember("The honey harvest secret of project B.", agent="x", scope="project",
                     project="other", importance=0.8)
        services = HiveServices.open(hive, OfflineProvider())
        services.ltm = ltm
        board = services.board
        [ref] = TaskBoard(hive, settle_time=0).scan_pending()
        board.claim(ref, "worker")
        agent = Agent("worker", services)
        cfg = agent.config()
        assert cfg is not None
        p = perceive(hive, cfg, board, agent.mailbox, services.knowledge, agent.working, {})
        view = await agent.context.view(cfg, p)
    contents = [e["content"] for e in view.context.entries if e["metadata"]["type"] == "context"]
    assert contents == ["The honey harvest is in late August."]
    assert view.recalled is not None and len(view.recalled["results"]) == 1


def test_offline_run_records_memory_operations_in_the_audit(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", front="domain: docs\ntask_type: summary\n")
    daemon = Daemon(hive, fast_config(hive), OfflineProvider(),
                    RunOptions(until_idle=True, idle_settle=0.2))
    asyncio.run(daemon.run())
    records = [json.loads(x) for x in hive.audit_path("worker").read_text().splitlines()]
    cycle = next(r for r in records if r["event"] == "cycle" and r["tasks"] == ["t1"])
    ops = [m["op"] for m in cycle["effects"]["memories"]]
    assert "context" in ops and "end_task" in ops
    assert hive.memory_db.exists()


def test_reflection_writes_insights_with_their_sources(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Record what you learn about bees.", front="project: apiary\n")
    config = fast_config(hive)
    config.memory.reflection_threshold = 15.0

    def model(body: Any) -> Reply:
        system = body["system"][0]["text"] if isinstance(body["system"], list) else body["system"]
        if system.startswith("You reflect on an agent's recent observations"):
            return Reply(body=message_body([{"type": "text", "text": "What do bees need?"}]))
        if system.startswith("You reflect on an agent's memories"):
            return Reply(body=message_body([{"type": "text", "text": "Bees need flowers."}]))
        last = body["messages"][-1]["content"]
        if any(b.get("type") == "tool_result" for b in last if isinstance(b, dict)):
            return Reply(body=message_body([{"type": "text", "text": "ok"}]))
        calls = [
            {"type": "tool_use", "id": "a", "name": "remember",
             "input": {"content": "Bees visit clover flowers.", "importance": 1.0}},
            {"type": "tool_use", "id": "b", "name": "remember",
             "input": {"content": "Bees need water near the hive.", "importance": 1.0}},
            {"type": "tool_use", "id": "c", "name": "complete_task",
             "input": {"task_id": "t1", "result": "noted"}},
        ]
        return Reply(body=message_body(calls, stop_reason="tool_use"))

    with FakeAnthropic() as api:
        api.responder = model
        provider = AnthropicProvider(api_key="k", base_url=api.base_url, timeout=5)
        daemon = Daemon(hive, config, provider, RunOptions(until_idle=True, idle_settle=0.2))
        asyncio.run(daemon.run())

    with LongTermMemory(hive) as ltm:
        insights = ltm.backend.query({"kind": MemoryKind.SEMANTIC})
        assert [r.content for r in insights] == ["Bees need flowers."]
        assert insights[0].source_ids  # the memories it came from
    records = [json.loads(x) for x in hive.audit_path("worker").read_text().splitlines()]
    assert any(r["event"] == "reflection" and r.get("written") for r in records)


def test_memory_blocks_are_dropped_from_working_memory_when_no_longer_recalled(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    with LongTermMemory(hive) as ltm:
        services = HiveServices.open(hive, OfflineProvider())
        services.ltm = ltm
        agent = Agent("worker", services)
        cfg = agent.config()
        assert cfg is not None
        p = perceive(hive, cfg, services.board, agent.mailbox, services.knowledge,
                     agent.working, {})
        asyncio.run(agent.context.view(cfg, p))
    assert not [b for b in agent.working.by_type(BlockType.CONTEXT)]
