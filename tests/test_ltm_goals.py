"""A task's goal (domain/task_type): given in its front matter or inferred, it labels what
the task stores, names the value learned from its outcome, and ranks what it recalls."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.models import Task
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.base import ToolCall
from hivemind.ltm.goals import Goal, task_goal
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools import default_registry
from hivemind.tools.base import ToolContext
from tests.helpers import write_agent, write_task
from tests.test_ltm_setting_levels import recalled, seed


@pytest.mark.parametrize(("front", "title", "body", "skills", "goal"), [
    ({"domain": "billing", "task_type": "fix"}, "Write the report", "", ["sql"],
     Goal("billing", "fix")),
    ({}, "Fix the nightly SQL export", "", ["billing", "sql"], Goal("sql", "fix")),
    ({}, "", "Please summarise the Data Warehouse notes.", ["data warehouse"],
     Goal("data warehouse", "summarise")),
    ({}, "Fixing the invoices", "", [], Goal(None, "fix")),
    ({}, "The planning meeting", "", [], Goal(None, "plan")),
    ({}, "Releases of April", "", [], Goal(None, "deploy")),
    ({"domain": "ops"}, "Hello", "", ["billing"], Goal("ops", None)),
    ({}, "Hello there", "A note for later.", ["billing"], Goal(None, None)),
    ({}, "Refund ACME's sqlite invoice", "", ["sql"], Goal(None, None)),
], ids=["front-matter-wins", "skill-named", "skill-of-two-words", "a-form-of-fix",
        "planning", "releases", "domain-given-type-none", "nothing", "skill-inside-a-word"])
def test_a_tasks_goal_is_its_front_matters_else_inferred(
    front: dict[str, str], title: str, body: str, skills: list[str], goal: Goal
) -> None:
    task = Task(id="t1", title=title, body=body, **front)
    assert task_goal(task, skills) == goal


def test_a_goal_is_named_domain_slash_type_and_none_without_either() -> None:
    assert Goal("billing", None).key == "billing/general"
    assert Goal(None, "fix").key == "general/fix"
    assert Goal().key is None


def tool_ctx(hive: Hive, ltm: LongTermMemory, skills: list[str], body: str,
             front: str = "project: acme\n") -> ToolContext:
    write_agent(hive, "ann")
    write_task(hive, "t1", body, front=front)
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.scan_pending()
    claimed = board.claim(ref, "ann")
    assert claimed is not None
    return ToolContext(
        hive=hive, agent="ann", config=AgentConfig(name="ann", skills=skills), board=board,
        post=PostOffice(hive), working=WorkingMemoryManager(), active_tasks={"t1": claimed},
        ltm=ltm,
    )


async def call(ctx: ToolContext, name: str, **args: object) -> str:
    result = await default_registry().execute(ctx, ToolCall(id="c", name=name, input=args))
    assert not result.is_error, result.content
    return result.content


async def test_what_a_task_remembers_carries_its_inferred_goal(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        ctx = tool_ctx(hive, ltm, ["billing"], "Fix the billing export of March.")
        await call(ctx, "remember", content="The export needs the VAT column.")
        [record] = ltm.backend.query({})
    assert (record.domain, record.task_type) == ("billing", "fix")


async def test_a_task_end_learns_for_the_inferred_goal(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        ltm.remember("The billing export needs the VAT column.", agent="ann",
                     scope="project", project="acme")
        ctx = tool_ctx(hive, ltm, ["billing"], "Fix the billing export of March.")
        await call(ctx, "recall", query="billing export")
        await call(ctx, "complete_task", task_id="t1", result="fixed")
        [record] = ltm.backend.query({})
    assert record.goal_values["billing/fix"] > 0.5


async def test_recall_keeps_only_the_domain_and_task_type_asked(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        for domain, task_type in [("billing", "fix"), ("billing", "review"), ("ops", "fix")]:
            ltm.remember(f"Export rule for {domain} {task_type}: check the VAT column.",
                         agent="ann", scope="project", project="acme", domain=domain,
                         task_type=task_type)
        ctx = tool_ctx(hive, ltm, [], "Look at the export.")
        every = await call(ctx, "recall", query="export VAT column")
        billing = await call(ctx, "recall", query="export VAT column", domain="billing")
        fixes = await call(ctx, "recall", query="export VAT column", domain="billing",
                           task_type="fix")
        none = await call(ctx, "recall", query="export VAT column", domain="sales")
    assert every.count("Export rule") == 3
    assert billing.count("Export rule") == 2 and "ops" not in billing
    assert fixes.count("Export rule") == 1 and "billing fix" in fixes
    assert none == "nothing found"


@pytest.mark.parametrize(("text", "first"), [
    ("Fix the duplicate invoice charge of the billing run.", "delta"),
    ("Look at the duplicate invoice charge.", "alpha"),
], ids=["goal-inferred", "no-goal"])
def test_each_cycle_ranks_by_the_value_learned_for_the_tasks_goal(
    hive: Hive, text: str, first: str
) -> None:
    ids = seed(hive)  # the "delta" memory helped billing/fix tasks before
    rom = "skills: [billing]\nretrieval: {alpha: 0.1, beta: 0, gamma: 0, delta: 1}\n"
    found = recalled(hive, rom=rom, text=text, task_front="project: acme\n")
    assert found[0]["id"] == ids[first]


def test_a_goal_nothing_has_learned_for_changes_no_ranking(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        for n in range(6):
            ltm.remember(f"Export rule {n}: check the VAT column {'twice' * n}", agent="ann",
                         scope="project", project="acme", importance=0.1 * n)
        now = datetime.now(UTC)
        plain = ltm.recall("export VAT column", agent="ann", project="acme", at=now,
                           record_access=False)
        goaled = ltm.recall("export VAT column", agent="ann", project="acme", at=now,
                            goal="billing/fix", record_access=False)
    assert [(m.id, m.score) for m in goaled] == [(m.id, m.score) for m in plain]
