"""Every long-term memory setting works at the level it is given (a ROM over hive.toml
over the defaults), seen where it acts: the memories an agent's cycle recalls, as its
audit record shows them (a real daemon, the offline provider, real SQLite)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.ltm.records import utcnow
from hivemind.ltm.store import LongTermMemory
from hivemind.settings import AgentSettings
from tests.helpers import run_until_idle, write_agent, write_task

TASK = "Refund the duplicate invoice charge of ACME."
# One memory per term of the score: each alone puts its own memory first.
MEMORIES = {
    "alpha": ("Refund a duplicate invoice charge from the refund page.", 0.1, 60, None),
    "beta": ("Invoice numbers changed format last spring.", 0.1, 0, None),
    "gamma": ("Any charge dispute needs the customer's written consent.", 1.0, 60, None),
    "delta": ("The duplicate detector runs every night at two.", 0.1, 60, 1.0),
}
ONLY = {w: {x: (1.0 if x == w else 0.0) for x in MEMORIES} for w in MEMORIES}


def seed(hive: Hive) -> dict[str, str]:
    """The four memories in project acme; returns weight → memory id."""
    now = utcnow()
    ids = {}
    with LongTermMemory(hive) as ltm:
        for weight, (text, importance, days, value) in MEMORIES.items():
            record = ltm.remember(text, agent="ann", scope="project", project="acme",
                                  importance=importance, at=now - timedelta(days=days))
            if value is not None:
                record.goal_values = {"billing/fix": value}
                ltm.backend.add(record)
            ids[weight] = record.id
    return ids


def table(name: str, values: dict[str, float]) -> str:
    return f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())


def flow(values: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in values.items()) + "}"


def recalled(hive: Hive, *, rom: str = "", toml: str = "", text: str = TASK,
             task_front: str = "project: acme\ndomain: billing\ntask_type: fix\n"
             ) -> list[dict[str, Any]]:
    """The memories the agent's first cycle on the task recalled, best first."""
    if toml:
        hive.config_file.write_text(toml)
    write_agent(hive, "ann", front=rom)
    write_task(hive, "t1", text, front=task_front)
    run_until_idle(hive)
    records = [json.loads(x) for x in hive.audit_path("ann").read_text().splitlines()]
    cycle = next(r for r in records if r["event"] == "cycle" and r["tasks"] == ["t1"])
    [context] = [m for m in cycle["effects"]["memories"] if m["op"] == "context"]
    results: list[dict[str, Any]] = context["results"]
    return results


def test_by_default_the_most_relevant_memory_comes_first(hive: Hive) -> None:
    ids = seed(hive)
    assert recalled(hive)[0]["id"] == ids["alpha"]


@pytest.mark.parametrize("weight", list(MEMORIES))
def test_a_weight_in_hive_toml_changes_what_comes_first(hive: Hive, weight: str) -> None:
    ids = seed(hive)
    found = recalled(hive, toml=table("agents.retrieval", ONLY[weight]))
    assert found[0]["id"] == ids[weight]


@pytest.mark.parametrize("weight", list(MEMORIES))
def test_a_weight_in_the_rom_wins_over_hive_toml(hive: Hive, weight: str) -> None:
    ids = seed(hive)
    other = "beta" if weight == "alpha" else "alpha"
    found = recalled(hive, toml=table("agents.retrieval", ONLY[other]),
                     rom=f"retrieval: {flow(ONLY[weight])}\n")
    assert found[0]["id"] == ids[weight]


def test_a_rom_with_every_weight_zero_scores_every_memory_zero(hive: Hive) -> None:
    seed(hive)
    found = recalled(hive, rom=f"retrieval: {flow(dict.fromkeys(MEMORIES, 0))}\n")
    assert found and all(m["score"] == 0 for m in found)


def test_a_rom_gives_one_weight_and_keeps_hive_tomls_others(hive: Hive) -> None:
    ids = seed(hive)
    # hive.toml: only importance; the ROM adds the learned value, twice as loud.
    found = recalled(hive, toml=table("agents.retrieval", ONLY["gamma"]),
                     rom="retrieval: {delta: 2.0}\n")
    assert found[0]["id"] == ids["delta"] and found[1]["id"] == ids["gamma"]


# -- the memory share of the context and its split among the tiers ---------------------


def seed_tiers(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        for n in range(30):  # more than the room holds
            ltm.remember(f"Invoice rule {n} of acme: refund duplicate charges within "
                         f"{n + 2} days of the invoice.", agent="ann", scope="project",
                         project="acme", importance=0.5)
            ltm.remember(f"Invoice rule {n} everywhere: refund duplicate charges after "
                         f"checking the invoice ledger {n + 1} times.", agent="ann",
                         scope="global", importance=0.5)


def tiers_recalled(hive: Hive, **levels: str) -> set[str]:
    found = recalled(hive, **levels)
    with LongTermMemory(hive) as ltm:
        tiers = {r.id: r.tier.value for r in ltm.backend.list_all()}
    return {tiers[m["id"]] for m in found}


SMALL_SHARE = "[memory]\nshare_of_budget = 0.01\n"
ROOM = "max_context_tokens: 40000\n"


def test_by_default_both_tiers_share_the_memory_room(hive: Hive) -> None:
    seed_tiers(hive)
    assert tiers_recalled(hive, toml=SMALL_SHARE, rom=ROOM) == {"project", "global"}


@pytest.mark.parametrize("tier", ["project", "global"])
def test_the_tier_split_in_hive_toml_decides_which_tier_fills_the_room(
    hive: Hive, tier: str
) -> None:
    seed_tiers(hive)
    split = {"task": 0.0, "project": 0.0, "global": 0.0, tier: 1.0}
    toml = SMALL_SHARE + table("agents.memory_tiers", split)
    assert tiers_recalled(hive, toml=toml, rom=ROOM) == {tier}


@pytest.mark.parametrize("tier", ["project", "global"])
def test_the_tier_split_in_the_rom_wins_over_hive_toml(hive: Hive, tier: str) -> None:
    seed_tiers(hive)
    other = "global" if tier == "project" else "project"
    toml = SMALL_SHARE + table("agents.memory_tiers", {"task": 0, "project": 0, "global": 0,
                                                       other: 1})
    split = flow({"task": 0, "project": 0, "global": 0, tier: 1})
    assert tiers_recalled(hive, toml=toml, rom=ROOM + f"memory_tiers: {split}\n") == {tier}


def test_share_of_budget_zero_in_hive_toml_recalls_nothing(hive: Hive) -> None:
    seed(hive)
    assert recalled(hive, toml="[memory]\nshare_of_budget = 0.0\n") == []


# -- refused: what a ROM or hive.toml cannot do --------------------------------------


def test_tier_shares_that_do_not_sum_to_one_are_refused_in_one_line(hive: Hive) -> None:
    write_agent(hive, "ann", front="memory_tiers: {task: 0.5, project: 0.5, global: 0.5}\n")
    roms = RomRegistry(hive, AgentSettings())
    with pytest.raises(Exception) as caught:
        roms.load("ann")
    message = str(caught.value)
    assert "ROM.md" in message and "must sum to 1" in message and "= 1.5" in message


def test_a_rom_giving_store_settings_is_told_they_are_the_hives(hive: Hive) -> None:
    write_agent(hive, "ann", front="memory: {max_items: 50, share_of_budget: 0.3}\n")
    roms = RomRegistry(hive, AgentSettings())
    roms.tells_problems = False
    roms.load("ann")  # the agent runs
    [warning] = roms.warnings("ann")
    assert "max_items" in warning and "hive.toml [memory]" in warning


# -- hive.toml [memory]: the store's settings, the hive's alone -------------------------


def audit(hive: Hive, event: str) -> list[dict[str, Any]]:
    records = [json.loads(x) for x in hive.audit_path("ann").read_text().splitlines()]
    return [r for r in records if r["event"] == event]


def run_task(hive: Hive, toml: str = "", front: str = "project: acme\n") -> None:
    if toml:
        hive.config_file.write_text(toml)
    write_agent(hive, "ann")
    write_task(hive, "t1", TASK, front=front)
    run_until_idle(hive)


@pytest.mark.parametrize(("toml", "kept"), [("", False),
                                            ("[memory]\nconsolidate_importance = 0.0\n", True)],
                         ids=["default", "hive.toml"])
def test_consolidate_importance_decides_what_a_task_end_keeps(
    hive: Hive, toml: str, kept: bool
) -> None:
    run_task(hive, toml)
    [end] = [m for r in audit(hive, "cycle") for m in r["effects"]["memories"]
             if m["op"] == "end_task"]
    assert bool(end["consolidated"]) is kept
    with LongTermMemory(hive) as ltm:
        assert bool(ltm.backend.query({"project": "acme"})) is kept


def seed_important(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:
        for n in range(5):
            ltm.remember(f"Refunds of duplicate charge {n} need the invoice ledger.",
                         agent="ann", scope="project", project="acme", importance=1.0)


@pytest.mark.parametrize(("toml", "reflects"), [
    ("[memory]\nreflect_offline = true\n", False),
    ("[memory]\nreflect_offline = true\nreflection_threshold = 1\n", True),
    ("[memory]\nreflection_threshold = 1\n", True),  # offline agents reflect by rule
    ("[memory]\nreflect_offline = false\nreflection_threshold = 1\n", False),
], ids=["threshold-default", "threshold-1", "offline-by-default", "offline-turned-off"])
def test_reflection_settings_in_hive_toml_decide_whether_an_agent_reflects(
    hive: Hive, toml: str, reflects: bool
) -> None:
    seed_important(hive)
    run_task(hive, toml)
    # A reflection spends the points gathered (what the offline provider makes of the
    # questions, if anything, is its own affair).
    with LongTermMemory(hive) as ltm:
        assert (ltm.counter.points("ann", "acme") == 0) is reflects


@pytest.mark.parametrize(("toml", "held"), [("", 12), ("[memory]\nmax_items = 10\n", 10)],
                         ids=["default", "hive.toml"])
def test_max_items_in_hive_toml_bounds_a_scope(hive: Hive, toml: str, held: int) -> None:
    from typer.testing import CliRunner

    from hivemind.cli.app import app

    if toml:
        hive.config_file.write_text(toml)
    for n in range(12):
        result = CliRunner().invoke(app, ["memory", "add", f"note {n} on invoices",
                                          "--importance", "0.1", "--hive", str(hive.root)])
        assert result.exit_code == 0, result.output
    with LongTermMemory(hive) as ltm:
        assert ltm.backend.count() <= held and ltm.backend.count() >= held - 1


async def test_the_recall_tool_ranks_with_the_agents_own_weights(hive: Hive) -> None:
    from hivemind.hive.mailbox import PostOffice
    from hivemind.hive.tasks.board import TaskBoard
    from hivemind.llm.base import ToolCall
    from hivemind.memory.manager import WorkingMemoryManager
    from hivemind.settings import RetrievalWeights
    from hivemind.tools import default_registry
    from hivemind.tools.base import ToolContext

    ids = seed(hive)
    hive.config_file.write_text(table("agents.retrieval", ONLY["alpha"]))
    write_agent(hive, "ann", front=f"retrieval: {flow(ONLY['gamma'])}\n")
    roms = RomRegistry(hive, AgentSettings(retrieval=RetrievalWeights(**ONLY["alpha"])))
    cfg = roms.load("ann")  # the ROM's weights over hive.toml's, as the daemon loads it
    write_task(hive, "t1", TASK, front="project: acme\n")
    board = TaskBoard(hive, settle_time=0)
    claimed = board.claim(board.scan_pending()[0], "ann")
    assert claimed is not None
    with LongTermMemory(hive, weights=RetrievalWeights(**ONLY["alpha"])) as ltm:
        ctx = ToolContext(hive=hive, agent="ann", config=cfg, board=board,
                          post=PostOffice(hive), working=WorkingMemoryManager(),
                          active_tasks={"t1": claimed}, ltm=ltm)
        call = ToolCall(id="c", name="recall", input={"query": TASK})
        result = await default_registry().execute(ctx, call)
    assert result.content.splitlines()[0].startswith(f"[{ids['gamma']}]")


def test_store_settings_under_agents_in_hive_toml_say_where_they_belong(hive: Hive) -> None:
    from hivemind.errors import ConfigError
    from hivemind.hive.config import load_hive_config

    hive.config_file.write_text("[agents.memory]\nmax_items = 5\n")
    with pytest.raises(ConfigError) as caught:
        load_hive_config(hive)
    message = str(caught.value)
    assert "hive.toml" in message and "agents.memory is not a known field" in message
    assert "[memory]" in message and len(message.splitlines()) == 1


@pytest.mark.parametrize(("options", "first"), [([], "alpha"), (["--agent", "ann"], "gamma")],
                         ids=["hive.toml", "the-agents-rom"])
def test_memory_search_ranks_as_the_agent_named_would(
    hive: Hive, options: list[str], first: str
) -> None:
    from typer.testing import CliRunner

    from hivemind.cli.app import app

    ids = seed(hive)
    write_agent(hive, "ann", front=f"retrieval: {flow(ONLY['gamma'])}\n")
    result = CliRunner().invoke(app, ["memory", "search", TASK, "--project", "acme", "--json",
                                      "--hive", str(hive.root), *options])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["id"] == ids[first]
