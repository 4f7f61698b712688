"""Reflection: when an agent has gathered enough importance, turn memories into insights.

Importance is counted in points on the 1–10 scale of Generative Agents
(`1 + 9 × importance`, so 150 points ≈ 30 memories of middling importance) per
agent and project. When the count passes the threshold, the `Reflector` asks
questions about the agent's recent memories, retrieval answers each one, and
every insight is stored as a semantic memory that keeps the ids it came from.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from hivemind.ltm.backend import MemoryBackend
from hivemind.ltm.records import MemoryRecord

QUESTIONS_PER_REFLECTION = 3
MEMORIES_PER_QUESTION = 10
RECENT_MEMORIES = 100
REFLECTION_IMPORTANCE = 0.8


@runtime_checkable
class Reflector(Protocol):
    """The model side of reflection. A reflector with `offline = True` (the offline
    provider's rules) is skipped when `[memory] reflect_offline` is false."""

    async def questions(self, memories: Sequence[MemoryRecord]) -> list[str]:
        """Salient high-level questions the memories raise."""
        ...

    async def insights(self, question: str, memories: Sequence[MemoryRecord]) -> list[str]:
        """Insights that answer `question` from `memories`."""
        ...


@dataclass(frozen=True)
class Insight:
    question: str
    text: str
    source_ids: list[str]


class ImportanceCounter:
    """Points of importance gathered since the last reflection, per agent and project."""

    def __init__(self, backend: MemoryBackend) -> None:
        self.backend = backend

    def points(self, agent: str, project: str | None) -> float:
        raw = self.backend.meta_get(_key(agent, project))
        return float(json.loads(raw)) if raw else 0.0

    def add(self, agent: str, project: str | None, points: float) -> float:
        """Add `points`; read and written in one transaction, so two writers at once
        (threads, processes) both count."""
        with self.backend.transaction():
            total = self.points(agent, project) + points
            self.backend.meta_set(_key(agent, project), json.dumps(round(total, 6)))
        return total

    def reset(self, agent: str, project: str | None) -> None:
        self.backend.meta_set(_key(agent, project), None)


async def reflect(
    reflector: Reflector,
    recent: Sequence[MemoryRecord],
    answer: Callable[[str], Awaitable[list[MemoryRecord]] | list[MemoryRecord]],
) -> list[Insight]:
    """Ask the reflector's questions about `recent`, answer each by retrieval, gather insights."""
    if not recent:
        return []
    found: list[Insight] = []
    for question in (await reflector.questions(recent))[:QUESTIONS_PER_REFLECTION]:
        if not question.strip():
            continue
        got = answer(question)
        evidence = got if isinstance(got, list) else await got
        if not evidence:
            continue
        ids = [m.id for m in evidence]
        for text in await reflector.insights(question, evidence):
            if text.strip():
                found.append(Insight(question, text.strip(), ids))
    return found


def _key(agent: str, project: str | None) -> str:
    return f"reflect:{agent}:{project or ''}"
