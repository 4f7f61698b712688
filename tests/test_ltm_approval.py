"""Tiers as seed 002 has them: work of no project never writes the global tier, which
every agent of every project sees, without a person's approval."""

from __future__ import annotations

from hivemind.hive.document import load
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.base import ToolCall
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools import default_registry
from hivemind.tools.base import ToolContext
from tests.helpers import run_until_idle, write_agent, write_task


def ctx_for(hive: Hive, ltm: LongTermMemory, front: str | None) -> ToolContext:
    """The tools of agent ann holding task t1 (with `front`), or no task (None)."""
    write_agent(hive, "ann")
    board = TaskBoard(hive, settle_time=0)
    active = {}
    if front is not None:
        write_task(hive, "t1", "Look into the invoices.", front=front)
        claimed = board.claim(board.scan_pending()[0], "ann")
        assert claimed is not None
        active["t1"] = claimed
    return ToolContext(hive=hive, agent="ann", config=AgentConfig(name="ann"), board=board,
                       post=PostOffice(hive), working=WorkingMemoryManager(),
                       active_tasks=active, ltm=ltm)


async def call(ctx: ToolContext, name: str, **args: object) -> str:
    result = await default_registry().execute(ctx, ToolCall(id="c", name=name, input=args))
    assert not result.is_error, result.content
    return result.content


def mail_to_human(hive: Hive) -> list[str]:
    folder = hive.mailbox_dir(HUMAN) / "new"
    return [load(p).body for p in sorted(folder.glob("*.md"))]


async def test_what_a_task_of_no_project_remembers_waits_for_a_person(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        ctx = ctx_for(hive, ltm, front="")
        out = await call(ctx, "remember", content="Invoices are due on the 5th.")
        assert out.startswith("proposed")
        assert await call(ctx, "recall", query="invoices due") == "nothing found"
        [record] = ltm.backend.query({})
        assert (record.tier.value, record.status.value) == ("global", "proposed")
    [body] = mail_to_human(hive)
    assert f"hivemind memory approve {record.id}" in body


async def test_an_agent_holding_no_task_proposes_too(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        ctx = ctx_for(hive, ltm, front=None)
        out = await call(ctx, "remember", content="Invoices are due on the 5th.",
                         scope="global")
    assert out.startswith("proposed")


async def test_a_task_of_a_project_writes_its_project_and_global_at_once(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        ctx = ctx_for(hive, ltm, front="project: acme\n")
        await call(ctx, "remember", content="Invoices are due on the 5th.")
        await call(ctx, "remember", content="Every invoice has a VAT id.", scope="global")
        statuses = {r.tier.value: r.status.value for r in ltm.backend.query({})}
    assert statuses == {"project": "active", "global": "active"}
    assert mail_to_human(hive) == []


async def test_task_memories_of_no_project_are_promoted_as_proposals(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        ctx = ctx_for(hive, ltm, front="")
        await call(ctx, "remember", content="ACME pays late.", scope="task", importance=0.9)
        await call(ctx, "complete_task", task_id="t1", result="done")
        [record] = ltm.backend.query({})
    assert (record.tier.value, record.status.value) == ("global", "proposed")
    [body] = mail_to_human(hive)
    assert "Task t1, of no project," in body and record.id in body


def test_a_task_of_no_project_ends_with_one_message_for_all_it_proposes(hive: Hive) -> None:
    hive.config_file.write_text("[memory]\nconsolidate_importance = 0.0\n")  # keep all
    write_agent(hive, "ann")
    write_task(hive, "t1", "Look into the invoices.")
    run_until_idle(hive)
    with LongTermMemory(hive) as ltm:
        kept = ltm.backend.query({})
        assert len(kept) >= 2 and {r.status.value for r in kept} == {"proposed"}
        assert ltm.recall("invoices", agent="ann") == []
    [body] = [b for b in mail_to_human(hive) if "memory approve" in b]
    [approve] = [line for line in body.splitlines() if "hivemind memory approve" in line]
    assert sorted(approve.partition(" approve ")[2].split()) == sorted(r.id for r in kept)


def test_a_task_of_a_project_ends_with_active_memories_and_no_message(hive: Hive) -> None:
    hive.config_file.write_text("[memory]\nconsolidate_importance = 0.0\n")
    write_agent(hive, "ann")
    write_task(hive, "t1", "Look into the invoices.", front="project: acme\n")
    run_until_idle(hive)
    with LongTermMemory(hive) as ltm:
        kept = ltm.backend.query({})
    assert kept and {(r.tier.value, r.status.value) for r in kept} == {("project", "active")}
    assert not [b for b in mail_to_human(hive) if "memory approve" in b]


class OneInsight:
    """A reflector that asks one question and draws one insight (a model's stand-in)."""

    offline = False

    async def questions(self, memories: object) -> list[str]:
        return ["what do invoices need"]

    async def insights(self, question: str, memories: object) -> list[str]:
        return ["Invoices need a VAT id and a due date."]


async def test_insights_of_no_project_wait_for_a_person(hive: Hive) -> None:
    from hivemind.settings import MemorySettings

    with LongTermMemory(hive, MemorySettings(reflection_threshold=1)) as ltm:
        ltm.remember("Invoices are due on the 5th.", agent="ann", scope="global",
                     importance=1.0)
        ltm.remember("Acme invoices carry a VAT id.", agent="ann", scope="project",
                     project="acme", importance=1.0)
        [global_insight] = await ltm.maybe_reflect("ann", OneInsight())
        [project_insight] = await ltm.maybe_reflect("ann", OneInsight(), project="acme")
    assert global_insight.status.value == "proposed"
    assert project_insight.status.value == "active"
    [body] = mail_to_human(hive)
    assert global_insight.id in body
