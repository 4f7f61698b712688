"""Reflection through the agent's model: questions from recent memories, then insights.

Both steps are single tool-less calls; the answer is one item per line. The
offline provider calls no model: its agents reflect by `OfflineReflector`'s rules.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hivemind.agent.audit import AuditLog
from hivemind.agent.record import Reflection
from hivemind.errors import ModelError
from hivemind.llm.base import ModelRequest, Provider
from hivemind.ltm.offline_reflection import OfflineReflector
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.reflection import Reflector
from hivemind.ltm.store import LongTermMemory

QUESTIONS_PROMPT = (
    "You reflect on an agent's recent observations. Reply with the three most salient "
    "high-level questions they raise, one per line, nothing else."
)
INSIGHTS_PROMPT = (
    "You reflect on an agent's memories. Reply with up to three short insights that answer "
    "the question from these memories only, one per line, nothing else."
)


class ProviderReflector:
    """A `Reflector` backed by the hive's model provider."""

    def __init__(self, provider: Provider, agent: str, model: str) -> None:
        self.provider = provider
        self.agent = agent
        self.model = model
        self.offline = provider.offline

    async def _ask(self, system: str, payload: object) -> list[str]:
        text = json.dumps(payload, ensure_ascii=False)
        response = await self.provider.complete(
            ModelRequest(agent=self.agent, model=self.model, system=system,
                         context_stable="", context_volatile=text, max_output_tokens=512)
        )
        return [line.strip(" -*\t") for line in response.text.splitlines() if line.strip()]

    async def questions(self, memories: Sequence[MemoryRecord]) -> list[str]:
        return await self._ask(
            QUESTIONS_PROMPT, [{"id": m.id, "content": m.content} for m in memories]
        )

    async def insights(self, question: str, memories: Sequence[MemoryRecord]) -> list[str]:
        return await self._ask(
            INSIGHTS_PROMPT,
            {"question": question, "memories": [{"id": m.id, "content": m.content}
                                                 for m in memories]},
        )


async def reflect(ltm: LongTermMemory, reflector: ProviderReflector, project: str | None,
                  audit: AuditLog, cycle: int) -> None:
    """Reflect when enough importance has gathered (with the offline provider, by rules
    that need no model); the audit log says what was written, or why nothing could be."""
    chosen: Reflector = OfflineReflector() if reflector.offline else reflector
    try:
        written = await ltm.maybe_reflect(reflector.agent, chosen, project=project)
    except ModelError as exc:
        audit.append(Reflection(cycle=cycle, error=str(exc)))
        return
    if written:
        audit.append(Reflection(
            cycle=cycle, written=[{"id": r.id, "content": r.content} for r in written]))
