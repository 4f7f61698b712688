"""Relevance of a block to the current task: confidence × recency × keyword overlap.

The seed formula: recency `1 / (1 + age_hours)`, a keyword factor `1 + 0.2 × overlap`
with the task's keywords, ×1.5 for recently used files, capped at 1.0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from hivemind.clock import utcnow
from hivemind.memory.blocks import AnyBlock

_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)

_STOP_TEXT = """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each few for
    from further had has have having he her here hers him his how if in into is it its itself
    just me more most my no nor not now of off on once only or other our out over own please
    same she should so some such than that the their them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours md py txt use using make new also get set"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_TEXT.split())


class RelevanceWeights(BaseModel):
    """The knobs of the relevance score; the defaults are the seed formula."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    recency_hours: float = Field(default=1.0, gt=0, description="age at which recency halves")
    keyword_boost: float = Field(default=0.2, ge=0, description="per task keyword shared")
    recent_file_boost: float = Field(default=1.5, ge=1, description="block's file used lately")
    cap: float | None = Field(default=1.0, gt=0, description="upper bound; None = no cap")


def keywords(text: str) -> frozenset[str]:
    """Lower-case words of `text` (letters and digits, 2+ long) minus stop words."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS)


class RelevanceScorer:
    """Scores blocks against the current task's keywords and recently used files."""

    def __init__(
        self,
        weights: RelevanceWeights | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        # Bumped whenever weights, task keywords or recent files change: boosts cached
        # by the selector for an older generation are stale.
        self.generation = 0
        self._weights = weights or RelevanceWeights()
        self._now = now or utcnow
        self.task_keywords: frozenset[str] = frozenset()
        self.recent_files: frozenset[str] = frozenset()
        # keywords_text() is the same string cycle after cycle; the regex is the cost.
        self._words: dict[str, frozenset[str]] = {}

    @property
    def weights(self) -> RelevanceWeights:
        return self._weights

    @weights.setter
    def weights(self, value: RelevanceWeights) -> None:
        self._weights = value
        self.generation += 1

    def set_task(self, text: str) -> None:
        """Take the task's keywords from `text` (stop words ignored)."""
        found = keywords(text)
        if found != self.task_keywords:  # the same task cycle after cycle costs nothing
            self.task_keywords = found
            self.generation += 1

    def set_recent_files(self, paths: Iterable[str]) -> None:
        """Paths (as the blocks name them) the agent used lately; their blocks get a boost."""
        found = frozenset(paths)
        if found != self.recent_files:
            self.recent_files = found
            self.generation += 1

    def now(self) -> datetime:
        return self._now()

    def boost(self, block: AnyBlock) -> float:
        """The factor from task keywords and recent files (1.0 when neither applies)."""
        words = self.words(block) if self.task_keywords else frozenset()
        return self.boosts([words], [block.file_path() if self.recent_files else None])[0]

    def words(self, block: AnyBlock) -> frozenset[str]:
        """The keywords of a block (they depend on the block alone, not on the task)."""
        text = block.keywords_text()
        words = self._words.get(text)
        if words is None:
            if len(self._words) > 50_000:
                self._words.clear()
            words = self._words[text] = keywords(text)
        return words

    def boosts(
        self, words: Sequence[frozenset[str]], paths: Sequence[str | None]
    ) -> list[float]:
        """`boost` of many blocks, given their keywords and files (see `file_path`):
        callers that score the same blocks task after task keep both, and the set work
        runs in bulk."""
        w = self.weights
        task = self.task_keywords
        if task:
            per = w.keyword_boost
            factors = [1.0 + per * n if n else 1.0 for n in map(len, map(task.__and__, words))]
        else:
            factors = [1.0] * len(words)
        recent = self.recent_files
        if recent:
            times = w.recent_file_boost
            factors = [
                f * times if p is not None and p in recent else f
                for f, p in zip(factors, paths, strict=True)
            ]
        return factors

    def combine(self, confidence: float, age_seconds: float, boost: float) -> float:
        """confidence × boost × recency(age), capped: the formula `score` applies."""
        weight = confidence * boost
        scale = self.recency_seconds
        # weight / (1 + age/scale), written as the selector computes it in bulk, so
        # both give the same float.
        score = weight * scale / (scale + age_seconds) if age_seconds > 0.0 else weight
        cap = self.weights.cap
        return score if cap is None or score <= cap else cap

    @property
    def recency_seconds(self) -> float:
        return self.weights.recency_hours * 3600.0

    def score(self, block: AnyBlock, now: datetime | None = None) -> float:
        """confidence × recency × keyword factor (× recent-file boost), capped."""
        age = epoch_seconds(now or self._now()) - epoch_seconds(block.timestamp)
        return self.combine(block.confidence, age, self.boost(block))

    def keyword_overlap(self, block: AnyBlock) -> frozenset[str]:
        """The task keywords `block` shares (for explanations)."""
        return self.task_keywords & keywords(block.keywords_text())


def epoch_seconds(ts: datetime) -> float:
    """POSIX seconds; a naive datetime is taken as UTC (hivemind writes UTC everywhere)."""
    return (ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)).timestamp()
