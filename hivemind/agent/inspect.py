"""What an agent would be sent if it thought now: the same perceive → select → build.

Read-only: nothing is claimed, marked read or written. Pending tasks the
dispatcher would hand this agent are shown as they would appear once claimed.
"""

from __future__ import annotations

from typing import Any

from hivemind.agent.cycle import Agent
from hivemind.agent.perceive import perceive, task_block
from hivemind.agent.services import HiveServices
from hivemind.errors import ConfigError, UnknownAgentError
from hivemind.hive.layout import Hive
from hivemind.hive.listing import read_each
from hivemind.hive.models import Task, TaskState
from hivemind.hive.taskref import TaskRef
from hivemind.llm.offline import OfflineProvider
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.blocks import AnyBlock


def _pending_read_only(hive: Hive) -> list[TaskRef]:
    """Pending tasks as they are now; unlike the board's scan, moves nothing (one that
    cannot be read is left out: the daemon rejects it, `hivemind status` says why)."""
    return sorted(
        (TaskRef(task, path, TaskState.PENDING, None, st.st_mtime)
         for path, st, task in read_each(hive.tasks_dir) if isinstance(task, Task)),
        key=lambda ref: ref.path,
    )


def _row(block: AnyBlock, tokens: int, kept: bool, reason: str) -> dict[str, Any]:
    return {
        "id": block.id,
        "type": block.type.value,
        "priority": block.priority.name.lower(),
        "tokens": tokens,
        "kept": kept,
        "reason": reason,
    }


async def inspect_agent(hive: Hive, name: str, budget: int | None = None) -> dict[str, Any]:
    """A report of every block of `name`'s context: kept or dropped, why, tokens per type."""
    names = hive.agent_names()
    if name not in names:
        known = ", ".join(names) if names else "none (add agents/<name>/ROM.md)"
        raise UnknownAgentError(f"no agent named {name!r} in {hive.root}; agents: {known}")
    services = HiveServices.open(hive, OfflineProvider())
    if hive.memory_db.exists():  # the memories the agent would get too (none is created)
        services.ltm = LongTermMemory(hive, services.config.memory,
                                      services.config.agents.retrieval)
    try:
        return await _inspect(hive, name, services, budget)
    finally:
        if services.ltm is not None:
            services.ltm.close()


async def _inspect(
    hive: Hive, name: str, services: HiveServices, budget: int | None
) -> dict[str, Any]:
    agent = Agent(name, services)
    cfg = agent.config()
    if cfg is None:
        raise ConfigError(agent.config_error or f"{hive.rom_path(name)}: invalid ROM")
    p = perceive(hive, cfg, services.board, agent.mailbox, services.knowledge, agent.working,
                 services.board_figures())
    configs = services.roms.configs()
    load = {n: len(services.board.active(n)) for n in configs}
    done = services.board.done_ids()
    waiting = 0
    for ref in _pending_read_only(hive):
        if ref.task.id in p.active:
            continue
        if all(d in done for d in ref.task.depends_on) and (
            services.board.route(ref, list(configs.values()), load) == name
        ):
            block = task_block(hive, ref)
            block.status = "pending"
            agent.working.add(block)
            waiting += 1
    view = await agent.view(cfg, p, budget, looking=True)
    kept_rows = [
        _row(b, view.built.token_counts[b.id], True, view.built.notes.get(b.id, ""))
        for b in view.selection.kept
        if b.id in view.built.token_counts
    ]
    dropped_rows = [
        _row(d.block, d.tokens, False, d.reason)
        for d in [*view.selection.dropped, *view.built.dropped]
    ]
    by_type: dict[str, int] = {}
    for entry in view.built.entries:
        kind = entry["metadata"]["type"]
        by_type[kind] = by_type.get(kind, 0) + view.built.token_counts[entry["id"]]
    return {
        "agent": name,
        "max_context_tokens": cfg.max_context_tokens,
        "budget": view.budget,
        "used": view.built.tokens,
        "pending_tasks_shown": waiting,
        "config_error": agent.config_error,
        "blocks": kept_rows + dropped_rows,
        "tokens_by_type": by_type,
    }
