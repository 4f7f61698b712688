"""Reflection without a model: recurring topics of recent memories, deterministic.

The offline provider calls no model, so its reflector (`OfflineReflector`) asks
about the words most of the agent's recent memories share, and answers each with
a note of how many memories mention it and the most important of them. Every
insight says it was made without a model. The same memories give the same
insights, so offline runs and tests see reflection happen as it would with a model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hivemind.ltm.analysis import STOP_WORDS, words
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.reflection import QUESTIONS_PER_REFLECTION

LABEL = "[offline reflection, no model]"
_QUESTION = "What do my memories say about {topic}?"
_MIN_MEMORIES = 2  # a topic is one that at least two memories share
_QUOTED_CHARS = 160


def _topics(text: str) -> set[str]:
    return {w for w in words(text) if len(w) > 3 and w not in STOP_WORDS and not w.isdigit()}


def _topic_of(question: str) -> str | None:
    head, _, rest = _QUESTION.partition("{topic}")
    if question.startswith(head) and question.endswith(rest):
        return question[len(head) : len(question) - len(rest)]
    return None


class OfflineReflector:
    """A `Reflector` that needs no model (see the module's docstring)."""

    offline = True  # `[memory] reflect_offline = false` turns it off

    async def questions(self, memories: Sequence[MemoryRecord]) -> list[str]:
        counts = Counter(t for m in memories for t in _topics(m.content))
        shared = [(n, t) for t, n in counts.items() if n >= _MIN_MEMORIES]
        shared.sort(key=lambda nt: (-nt[0], nt[1]))  # most shared first, then by name
        return [_QUESTION.format(topic=t) for _, t in shared[:QUESTIONS_PER_REFLECTION]]

    async def insights(self, question: str, memories: Sequence[MemoryRecord]) -> list[str]:
        topic = _topic_of(question)
        if topic is None:
            return []
        about = [m for m in memories if topic in _topics(m.content)]
        if len(about) < _MIN_MEMORIES:
            return []
        top = max(about, key=lambda m: (m.importance, m.created_at, m.id))
        quoted = " ".join(top.content.split())
        if len(quoted) > _QUOTED_CHARS:
            quoted = quoted[: _QUOTED_CHARS - 1] + "…"
        return [f"{LABEL} {len(about)} memories are about {topic!r}; the most important: "
                f"{quoted}"]
