"""What an agent would be sent if it thought now: the same perceive → select → build.

Read-only: nothing is claimed, marked read or written. Pending tasks the
dispatcher would hand this agent are shown as they would appear once claimed.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hivemind.agent.cycle import Agent
from hivemind.agent.perceive import Perception, perceive, task_block
from hivemind.agent.prompt import team_text
from hivemind.agent.services import HiveServices
from hivemind.agent.view import ContextView
from hivemind.errors import ConfigError, UnknownAgentError
from hivemind.hive.layout import Hive
from hivemind.hive.models import Task, TaskState
from hivemind.hive.tasks.listing import read_each
from hivemind.hive.tasks.ref import TaskRef
from hivemind.llm.offline import OfflineProvider
from hivemind.ltm.sqlite import SQLiteBackend
from hivemind.ltm.store import LongTermMemory
from hivemind.memory.blocks import AnyBlock, Priority
from hivemind.memory.budget import TIER_LIMITS
from hivemind.memory.builder import ContextBuilder
from hivemind.memory.selector import Selection
from hivemind.settings import AgentConfig


def _pending_read_only(hive: Hive) -> list[TaskRef]:
    """Pending tasks as they are now; unlike the board's scan, moves nothing (one that
    cannot be read is left out: the daemon rejects it, `hivemind status` says why)."""
    return sorted(
        (TaskRef(task, path, TaskState.PENDING, None, st.st_mtime)
         for path, st, task in read_each(hive.tasks_dir) if isinstance(task, Task)),
        key=lambda ref: ref.path,
    )


def _row(
    block: AnyBlock, tokens: int, estimated: int | None, kept: bool, reason: str
) -> dict[str, Any]:
    path = block.file_path()
    return {
        "id": block.id,
        "file": path if path and not block.id.startswith(path) else None,  # a mail's, say
        "type": block.type.value,
        "priority": block.priority.name.lower(),
        "tokens": tokens,
        "estimated": estimated,
        "kept": kept,
        "reason": reason,
    }


async def _counted(
    services: HiveServices, blocks: list[AnyBlock], budget: int
) -> dict[str, int]:
    """Tokens of each block's entry as the builder would count it if kept in a context
    of `budget` (its content loaded, a long one compressed as it would be there):
    dropped blocks on the same basis as kept ones."""
    if not blocks:
        return {}
    scratch = ContextBuilder(services.loader, services.counter, services.compressor)
    unbounded = sys.maxsize
    everything = Selection(kept=blocks, dropped=[], tokens={}, scores={}, budget=unbounded,
                           used=0)
    return (await scratch.build(everything, unbounded, cap_budget=budget)).token_counts


async def inspect_agent(hive: Hive, name: str, budget: int | None = None) -> dict[str, Any]:
    """A report of every block of `name`'s context: kept or dropped, why, tokens per type."""
    _check_agent(hive, name)
    with _services(hive) as services:
        return await _inspect(hive, name, services, budget)


def _check_agent(hive: Hive, name: str) -> None:
    names = hive.agent_names()
    if name not in names:
        known = ", ".join(names) if names else "none (add agents/<name>/ROM.md)"
        raise UnknownAgentError(f"no agent named {name!r} in {hive.root}; agents: {known}")


@contextmanager
def _services(hive: Hive) -> Iterator[HiveServices]:
    """The hive's services for a look: the offline provider (nothing is sent), and the
    long-term memory read-only, if there is one (none is created)."""
    services = HiveServices.open(hive, OfflineProvider())
    # The report names the looked-at agent's own problems; every agent's are `status`'s.
    services.roms.tells_problems = False
    store: SQLiteBackend | None = None
    if hive.memory_db.is_file():
        # Read-only: a look writes nothing, and a read-only hive can be looked at.
        store = SQLiteBackend(hive.memory_db, read_only=True)
        services.ltm = LongTermMemory(store, services.config.memory,
                                      services.config.agents.retrieval)
    try:
        yield services
    finally:
        if store is not None:
            store.close()


def kept_reasons(sel: Selection) -> dict[str, str]:
    """Why the selector kept each block: its tier, its score, and the share of the budget
    used once it was in (the selector keeps CRITICAL, then each tier in score order while
    the estimate stays under the tier's line)."""
    out, used, budget = {}, 0, sel.budget
    for block in sel.kept:
        used += sel.tokens.get(block.id, 0)
        share = f"{used:,}/{budget:,} tokens ({100 * used / budget:.1f} %)"
        tier = block.priority
        if tier is Priority.CRITICAL:
            out[block.id] = f"critical, always kept; {share}"
        else:
            score = sel.scores.get(block.id, 0.0)
            out[block.id] = (f"{tier.name.lower()}, score {score:.2f}; {share} "
                             f"≤ {TIER_LIMITS[tier]} %")
    return out


@dataclass
class _Look:
    """An agent made ready to think, and the view its next cycle would be built from."""

    agent: Agent
    cfg: AgentConfig
    perception: Perception
    view: ContextView
    waiting: int  # pending tasks shown as it would get them


async def _look(hive: Hive, name: str, services: HiveServices, budget: int | None) -> _Look:
    """Perceive, select and build as the agent's next cycle would (nothing is changed)."""
    agent = Agent(name, services)
    cfg = agent.config()
    if cfg is None:
        raise ConfigError(agent.config_error or f"{hive.rom_path(name)}: invalid ROM")
    agent.restore()  # its steps on the tasks it holds, as a restarted daemon gives them
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
    view = await agent.context.view(cfg, p, budget, looking=True)
    return _Look(agent, cfg, p, view, waiting)


async def _inspect(
    hive: Hive, name: str, services: HiveServices, budget: int | None
) -> dict[str, Any]:
    look = await _look(hive, name, services, budget)
    agent, cfg, p, view, waiting = look.agent, look.cfg, look.perception, look.view, look.waiting
    sel, built = view.selection, view.built
    why = kept_reasons(sel)
    # One basis per figure. `tokens`: counted, as the model gets the entry (for a dropped
    # block: as it would). `estimated`: the selector's guess made before reading
    # anything, which it keeps and drops by and its "over budget at" reasons count.
    counted = await _counted(services, [d.block for d in sel.dropped], view.budget)
    rows = [
        _row(b, built.token_counts[b.id], sel.tokens.get(b.id), True,
             "; ".join(filter(None, (why.get(b.id), built.notes.get(b.id)))))
        for b in sel.kept
        if b.id in built.token_counts
    ]
    # `d.tokens` is the selector's estimate (0: expired, never sized)...
    rows += [_row(d.block, counted[d.block.id], d.tokens or None, False, d.reason)
             for d in sel.dropped]
    # ...and the builder's count for what it dropped after loading.
    rows += [_row(d.block, d.tokens, sel.tokens.get(d.block.id), False, d.reason)
             for d in built.dropped]
    by_type: dict[str, int] = {}
    for entry in built.entries:
        kind = entry["metadata"]["type"]
        by_type[kind] = by_type.get(kind, 0) + built.token_counts[entry["id"]]
    return {
        "agent": name,
        "max_context_tokens": cfg.max_context_tokens,
        "budget": view.budget,
        "budget_parts": agent.context.budget_parts(cfg, team_text(name, p.team), budget),
        "used": built.tokens,
        "json_array_tokens": built.tokens - sum(built.token_counts.values()),
        "estimated_used": sel.used,
        "pending_tasks_shown": waiting,
        "config_error": agent.config_error,
        "problems": services.roms.warnings(name),
        "blocks": rows,
        "tokens_by_type": by_type,
        "notes_left_out": [{"id": b.id, "reason": r} for b, r in agent.context.shelf.left_out()],
    }


async def request_of(hive: Hive, name: str, budget: int | None = None) -> dict[str, Any]:
    """The first request `name`'s next cycle would send (as the cycle builds it): model,
    system prompt, tools, the JSON context; nothing is sent or changed."""
    _check_agent(hive, name)
    with _services(hive) as services:
        look = await _look(hive, name, services, budget)
        request = look.agent.context.request(look.cfg, look.view)
    return {
        "agent": name,
        "model": request.model,
        "max_output_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "system": request.system,
        "tools": [t.name for t in request.tools],
        "tool_specs": [t.model_dump() for t in request.tools],
        "context": request.context_json,
        "context_stable_chars": len(request.context_stable),
        "context_tokens": request.context_tokens,
        "pending_tasks_shown": look.waiting,
        "config_error": look.agent.config_error,
        "problems": services.roms.warnings(name),
        "mcp_servers": list(look.cfg.mcp),  # their tools: only where the daemon runs them
    }
