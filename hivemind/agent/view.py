"""What the model is sent: working memory selected and built under the budget, the
system prompt and the cycle's first request. The cycle and `hivemind inspect` both
assemble it here, so what inspect shows is what the model gets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hivemind.agent.perceive import Perception
from hivemind.agent.prompt import system_prompt, team_text
from hivemind.agent.record import DroppedEntry
from hivemind.agent.services import HiveServices
from hivemind.agent.shelf import KnowledgeShelf
from hivemind.llm.base import ModelRequest
from hivemind.ltm.goals import task_goal
from hivemind.ltm.records import recall_audit
from hivemind.memory.blocks import BlockType, ContextBlock, Priority
from hivemind.memory.builder import BuiltContext
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.memory.relevance import RelevanceScorer
from hivemind.memory.selector import MemorySelector, Selection
from hivemind.settings import MIN_CONTEXT_TOKENS, AgentConfig

FINISHED_ID = "context:finished"
FINISHED_KEPT = 20  # lines of the finished-tasks summary at most (at least half of it)
FINISHED_RESULT_CHARS = 150  # of a finished task's result, in its line of that summary


@dataclass
class ContextView:
    """What the model would be sent: the selection, the built context, the system prompt."""

    selection: Selection
    built: BuiltContext
    context: BuiltContext
    system: str
    budget: int
    recalled: dict[str, Any] | None = None

    def dropped_rows(self) -> list[DroppedEntry]:
        return [
            {"id": d.block.id, "reason": d.reason, "tokens": d.tokens}
            for d in [*self.selection.dropped, *self.built.dropped]
        ]


class ContextAssembler:
    """One agent's context: its scorer and selector stay warm between its cycles."""

    def __init__(self, name: str, services: HiveServices, working: WorkingMemoryManager) -> None:
        self.name = name
        self.services = services  # ltm and the memory settings may be set after we start
        self.working = working
        self.scorer = RelevanceScorer()
        self.selector = MemorySelector(
            services.loader, services.counter, self.scorer, services.compressor.max_block_tokens
        )
        self.shelf = KnowledgeShelf()

    def budget_parts(self, cfg: AgentConfig, team: str = "",
                     given: int | None = None) -> dict[str, int]:
        """Where the budget comes from: `given`, or max_context_tokens less what every
        request also carries (the output reserve, preamble and tools, the team line)."""
        if given is not None:
            return {"given": given}
        return {
            "max_context_tokens": cfg.max_context_tokens,
            "output_reserve": cfg.max_output_tokens,
            "preamble_and_tools": self.services.fixed_tokens(cfg),
            "team": self.services.counter.count(team) if team else 0,
        }

    def budget_for(self, cfg: AgentConfig, team: str = "") -> int:
        """Context tokens: max_context_tokens less all else a request carries."""
        parts = self.budget_parts(cfg, team)
        reserved = sum(parts.values()) - parts["max_context_tokens"]
        return max(MIN_CONTEXT_TOKENS, cfg.max_context_tokens - reserved)

    async def view(
        self, cfg: AgentConfig, p: Perception, budget: int | None = None, *,
        looking: bool = False,
    ) -> ContextView:
        """Select and build as the cycle does; the ROM entry becomes the system prompt.
        `looking`: only to show it (`hivemind inspect`): no memory is marked as used."""
        s = self.services
        tasks = [r.task.title + " " + r.task.body[:500] for r in p.active.values()]
        focus = " ".join(tasks + [m.message.subject for m in p.unread])
        self.scorer.set_task(focus)
        budget = budget or self.budget_for(cfg, team_text(self.name, p.team))
        recalled = self._recall_memories(cfg, p, focus, budget, touch=not looking)
        # Notes follow the tasks held (they are the cached prefix); holding none, the mail.
        work = " ".join(tasks) if tasks else focus
        blocks = self.shelf.choose(self.working.blocks(), work, self.scorer, budget,
                                   s.compressor.max_block_tokens, cfg.tools)
        selection = self.selector.select(blocks, budget)
        built = await s.builder.build(selection, budget)
        rom = [e for e in built.entries if e["metadata"].get("type") == BlockType.ROM.value]
        # The text `cfg` was read from: a ROM being saved right now is never half-read,
        # and a bad edit leaves the last good instructions in place with their config.
        rom_text = s.roms.text(self.name) or (rom[0]["content"] if rom else cfg.instructions)
        return ContextView(
            selection=selection,
            built=built,
            context=built.without_types({BlockType.ROM.value}),
            system=system_prompt(self.name, rom_text, p.team, cfg.summary),
            budget=budget,
            recalled=recalled,
        )

    def _recall_memories(
        self, cfg: AgentConfig, p: Perception, focus: str, budget: int, *, touch: bool = True
    ) -> dict[str, Any] | None:
        """Long-term memories for the work at hand become CONTEXT blocks (memory share),
        ranked as the agent's ROM says (over hive.toml's) and by the task's goal."""
        for block in self.working.by_type(BlockType.CONTEXT):
            if isinstance(block, ContextBlock) and block.context_type == "memory":
                self.working.remove(block.id)
        ltm = self.services.ltm
        if ltm is None or not focus.strip():
            return None
        ref = next(iter(p.active.values()), None)
        share = int(budget * self.services.config.memory.share_of_budget)
        found = ltm.context_for(
            focus, agent=self.name, project=ref.task.project if ref else None,
            task_id=ref.task.id if ref else None, max_tokens=share,
            count_tokens=self.services.counter.count, touch=touch, weights=cfg.retrieval,
            shares=cfg.memory_tiers, goal=task_goal(ref.task, cfg.skills).key if ref else None,
        )
        for m in found:
            self.working.add(ContextBlock(
                id=f"memory:{m.id}", context_type="memory", summary=m.content,
                related_ids=list(m.record.source_ids), priority=Priority.MEDIUM,
                confidence=max(0.0, min(1.0, m.score)),
                metadata={"tier": m.record.tier.value, "score": round(m.score, 4)},
            ))
        return {"op": "context", **recall_audit(focus[:200], found)}

    def request(self, cfg: AgentConfig, view: ContextView) -> ModelRequest:
        """The first request of the cycle: system, tools, the JSON context in two parts."""
        stable, volatile = view.context.json_parts()
        return ModelRequest(
            agent=self.name,
            role=cfg.summary,
            model=cfg.model,
            system=view.system,
            tools=self.services.tools.specs(cfg.tools, self.name),
            context_stable=stable,
            context_volatile=volatile,
            context_ids=[e["id"] for e in view.context.entries],
            context_tokens=view.context.tokens,
            max_output_tokens=cfg.max_output_tokens,
            temperature=cfg.temperature,
        )


def _finished_line(task_id: str, outcome: str, result: Any) -> str:
    """`- q1: done — 12,345 EUR, INV-778`: one line, its result cut to FINISHED_RESULT_CHARS."""
    line = f"- {task_id}: {outcome}"
    if not isinstance(result, str) or not result.strip():
        return line
    text = " ".join(result.split())
    if len(text) > FINISHED_RESULT_CHARS:
        text = text[: FINISHED_RESULT_CHARS - 1].rstrip() + "…"
    return f"{line} — {text}"


def finished_block(
    previous: object, finished: dict[str, str], said: dict[Any, Any]
) -> ContextBlock:
    """The finished-tasks summary: `previous` (the block it replaces, if one) with a line
    for each task of `finished` (id → done/failed) and what was `said` to end it."""
    lines = previous.summary.splitlines()[1:] if isinstance(previous, ContextBlock) else []
    lines = [*lines, *(_finished_line(tid, outcome, said.get(tid))
                       for tid, outcome in finished.items())]
    if len(lines) > FINISHED_KEPT:
        # Cut back to half at once: in between the summary only grows at its end, so
        # the request before it still serves the prompt cache up to there.
        lines = lines[-(FINISHED_KEPT // 2):]
    return ContextBlock(
        id=FINISHED_ID, context_type="finished_tasks", priority=Priority.LOW,
        summary="\n".join(["Tasks you finished recently:", *lines]),
    )
