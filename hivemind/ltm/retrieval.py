"""Ranking memories for a query: `α·relevance + β·recency + γ·importance + δ·value`.

1. Candidates are the `pool` best BM25 matches in scope (plus the `pool` nearest
   vectors when an embedder is set), so every candidate is about the query; and
   what `candidates.gather` adds: the days, people and neighbouring turns the
   question points at.
2. Recency, importance and value are min-max normalised over those candidates;
   relevance is a share of the best match's (min-max with its floor at zero: no
   match at all), so a match nearly as good as the best is nearly 1, not 0. With
   an embedder it is averaged with the min-max scaled cosine similarity; when the
   question names days, it is averaged with how near each memory is to them.
3. Recency, importance and value are weighted by relevance² (the *relevance
   gate*): they re-order memories that are about equally relevant — the newer
   of two statements of a fact wins — but cannot lift a weak match over a
   clearly relevant one. `gate=0` gives the plain weighted sum.

Why: min-max stretches any spread to 0–1, so over candidates whose dates are
spread evenly an ungated recency term is as loud as relevance. Min-max relevance,
though, gave the weakest candidate 0 however close it came, and the gate then
silenced its recency: of two statements of a fact, the stale one won. On the
generated set of bench/bench_retrieval.py (evidence evenly spread in time) the
defaults lift recall@1 from 0.24 (BM25 alone) to 0.39 (0.32 with min-max
relevance), and recall@1 on updated facts from 0.28 to 0.43 (0.35); with
importance pure noise, recall@5 stays within 0.01 of BM25's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from hivemind.ltm.backend import Filters, MemoryBackend
from hivemind.ltm.candidates import gather
from hivemind.ltm.embeddings import Embedder, VectorIndex
from hivemind.ltm.records import MemoryRecord, ScoredMemory, Tier, as_utc
from hivemind.ltm.scopes import MemoryRef
from hivemind.ltm.when import Window
from hivemind.settings import RetrievalWeights


@dataclass(frozen=True)
class RetrievalTuning:
    """Knobs below the weights; the defaults are what bench/bench_retrieval.py measured."""

    pool: int = 50
    """Candidates re-ranked per query (at least k)."""
    half_life_hours: float = 24.0 * 7
    """Recency halves every week since the last access."""
    gate: float = 2.0
    """Exponent of the relevance gate on recency, importance and value."""
    dense_share: float = 0.5
    """Share of embedding similarity in relevance when an embedder is set."""
    rank_fusion: bool = False
    """Merge the BM25 and embedding rankings by reciprocal-rank fusion instead of
    averaging their scaled scores (which ranked better: see `fuse`)."""
    default_value: float = 0.5
    """Learned value of a memory never scored for the goal."""
    minmax_relevance: bool = False
    """Relevance min-max over the candidates (DESIGN §5 as first written) instead of
    a share of the best match's."""


def minmax(values: Sequence[float], over: Sequence[bool] | None = None) -> list[float]:
    """Scale to 0–1 over the candidates; all equal → 1 (or 0 if all are 0).

    `over`: the candidates that set the scale (the others are clamped to it), so that
    turns joining as context do not re-order the matches by stretching the scale.
    """
    if not values:
        return []
    scale = [v for v, o in zip(values, over, strict=True) if o] if over else values
    low, high = min(scale or values), max(scale or values)
    if high - low <= 1e-12:
        return [1.0 if high > 0 else 0.0] * len(values)
    return [min(1.0, max(0.0, (v - low) / (high - low))) for v in values]


def of_best(values: Sequence[float]) -> list[float]:
    """Scale to 0–1 as a share of the best (no match at all is 0): `minmax` with its
    floor at zero. For relevance: min-max gave the weakest match 0 however close it
    came to the best, and the gate then silenced its recency and importance."""
    high = max(values, default=0.0)
    if high <= 0:
        return [0.0] * len(values)
    return [max(0.0, v) / high for v in values]


def recency(record: MemoryRecord, at: datetime, half_life_hours: float) -> float:
    """`0.5 ** (hours since last access / half-life)`, seen from `at`.

    An access after `at` does not count (the creation time does), and a memory made
    after `at` decays with its distance from `at` like a past one: "now" is `at`.
    """
    return recency_of(record.last_accessed, record.created_at, at, half_life_hours)


def recency_of(
    last_accessed: datetime, created_at: datetime, at: datetime, half_life_hours: float
) -> float:
    """`recency` from the two times alone (retention ranks without whole records)."""
    ref = last_accessed if last_accessed <= at else created_at
    hours = abs((at - ref).total_seconds()) / 3600.0
    return math.exp(-math.log(2) * hours / half_life_hours)


class Retriever:
    """Scores and ranks candidates from a backend (and, optionally, embeddings)."""

    def __init__(
        self,
        backend: MemoryBackend,
        weights: RetrievalWeights,
        tuning: RetrievalTuning | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.backend = backend
        self.weights = weights
        self.tuning = tuning or RetrievalTuning()
        self.embedder = embedder
        self.vectors = VectorIndex(backend)

    def retrieve(
        self,
        query: str,
        scope: Filters,
        *,
        k: int,
        at: datetime,
        goal: str | None = None,
        weights: RetrievalWeights | None = None,
    ) -> list[ScoredMemory]:
        """The `k` best memories in `scope` for `query`, best first, with every term."""
        w = weights or self.weights
        at = as_utc(at)
        pool = max(self.tuning.pool, k)
        found = gather(self.backend, query, scope, at=at, pool=pool)
        terms = found.terms
        # Keyed by (scope, id): a project and the global tier may both hold an id.
        records: dict[MemoryRef, MemoryRecord] = found.records
        bm25 = found.bm25
        sims: dict[str, float] | None = None
        if self.embedder is not None and query.strip():
            sims = self._dense(query, scope, pool, list(dict.fromkeys(i for _, i in records)))
            known = {i for _, i in records}
            missing = [i for i in sims if i not in known]
            if missing:
                extra = self.backend.query({"$and": [scope, {"id": {"$in": missing}}]})
                records.update((r.ref, r) for r in extra)
            sims = {i: s for i, s in sims.items() if i in {m for _, m in records}}
        if not records and not terms:
            # Nothing to match on ("", "?"): the most recently used memories.
            records = {
                r.ref: r for r in self.backend.query(scope, limit=pool, order_by="-last_accessed")
            }
        if not records:
            return []
        return self._rank(
            list(records.values()), bm25, sims, k=k, at=at, goal=goal, w=w,
            window=found.window, guests=frozenset(found.guests),
        )  # fmt: skip

    def _dense(self, query: str, scope: Filters, pool: int, lexical: list[str]) -> dict[str, float]:
        assert self.embedder is not None
        vector = self.embedder.embed([query])[0]
        name = self.embedder.name
        near = self.vectors.nearest(name, vector, scope, pool)
        near.update(self.vectors.similarity(name, vector, scope, lexical))
        return near

    def _rank(
        self,
        candidates: list[MemoryRecord],
        bm25: dict[MemoryRef, float],
        sims: dict[str, float] | None,
        *,
        k: int,
        at: datetime,
        goal: str | None,
        w: RetrievalWeights,
        window: Window | None = None,
        guests: frozenset[MemoryRef] = frozenset(),
    ) -> list[ScoredMemory]:
        t = self.tuning
        raw_bm25 = [bm25.get(r.ref, 0.0) for r in candidates]
        relevance = minmax(raw_bm25) if t.minmax_relevance else of_best(raw_bm25)
        if sims is not None:
            dense = [sims.get(r.id) for r in candidates]
            if not bm25:
                relevance = minmax([d or 0.0 for d in dense])
            elif t.rank_fusion:
                relevance = fuse(raw_bm25, dense, t.dense_share)
            else:
                relevance = blend(relevance, dense, t.dense_share)
        if window is not None:  # the days asked about count as much as the words
            relevance = [
                (rel + window.fit(r.created_at)) / 2
                for rel, r in zip(relevance, candidates, strict=True)
            ]
        matched = [r.ref not in guests for r in candidates]
        rec = minmax([recency(r, at, t.half_life_hours) for r in candidates], matched)
        imp = minmax([r.importance for r in candidates], matched)
        # A goal no candidate has a value for yet ranks nothing: all would tie at the top.
        if goal is not None and any(goal in r.goal_values for r in candidates):
            val = minmax([r.goal_values.get(goal, t.default_value) for r in candidates], matched)
        else:
            val = [0.0] * len(candidates)
        # Without any relevance signal there is nothing for the gate to protect.
        gate = t.gate if (bm25 or sims) else 0.0
        scored: list[ScoredMemory] = []
        for i, record in enumerate(candidates):
            secondary = w.beta * rec[i] + w.gamma * imp[i] + w.delta * val[i]
            score = w.alpha * relevance[i] + (relevance[i] ** gate) * secondary
            scored.append(
                ScoredMemory(
                    record=record,
                    score=score,
                    relevance=relevance[i],
                    recency=rec[i],
                    importance=imp[i],
                    value=val[i],
                    bm25=raw_bm25[i],
                    similarity=None if sims is None else sims.get(record.id),
                )
            )
        scored.sort(key=lambda s: (-s.score, -s.bm25, s.record.id, s.record.scope))
        return distinct(scored, k)


RRF_K = 60
"""Reciprocal-rank fusion's constant (Cormack et al. 2009): rank r counts 1/(60 + r)."""


def blend(
    lexical: Sequence[float], dense: Sequence[float | None], dense_share: float
) -> list[float]:
    """Relevance from both scores: the word relevance (already 0-1) and the cosine
    similarity min-max scaled, averaged with `dense_share`; no vector counts as 0."""
    meaning = minmax([d or 0.0 for d in dense])
    return [(1 - dense_share) * w + dense_share * m for w, m in zip(lexical, meaning, strict=True)]


def fuse(
    lexical: Sequence[float], dense: Sequence[float | None], dense_share: float
) -> list[float]:
    """Relevance from both rankings by reciprocal-rank fusion, min-max scaled: ranks,
    not scores, are merged. A candidate absent from a ranking (no word matched, no
    vector) gains nothing from it. Not the default: within one pool of candidates it
    flattens the differences near the top, and with all-MiniLM-L6-v2 it ranked worse
    than `blend` (bench_recall R@10 0.970 vs 0.977, nDCG@10 0.749 vs 0.777;
    bench_retrieval --quick R@1 0.417 vs 0.521, nDCG@10 0.690 vs 0.749)."""
    fused = [0.0] * len(lexical)
    for share, scores in ((1 - dense_share, lexical), (dense_share, dense)):
        ranked = sorted(
            (i for i, v in enumerate(scores) if v is not None and v > 0),
            key=lambda i: -(scores[i] or 0.0),
        )
        for rank, i in enumerate(ranked, start=1):
            fused[i] += share / (RRF_K + rank)
    return minmax(fused)


def distinct(ranked: Sequence[ScoredMemory], k: int) -> list[ScoredMemory]:
    """The first `k` of `ranked` whose texts differ: a text said again ("Thanks!", a
    question asked in three sessions) tells the reader nothing new the second time."""
    seen: set[str] = set()
    out: list[ScoredMemory] = []
    for m in ranked:
        text = " ".join(m.content.lower().split())
        if text not in seen:
            seen.add(text)
            out.append(m)
            if len(out) == k:
                break
    return out


def fit_budget(
    ranked: Sequence[ScoredMemory],
    max_tokens: int,
    count_tokens: Callable[[str], int],
    shares: Mapping[Tier, float],
) -> list[ScoredMemory]:
    """The best memories that fit `max_tokens`: each tier first within its share, then
    what the others left over, best first; returned in rank order."""
    cost = {m.ref: count_tokens(m.content) for m in ranked}
    chosen: set[MemoryRef] = set()
    used = dict.fromkeys(shares, 0)
    for m in ranked:
        tier = m.record.tier
        if used[tier] + cost[m.ref] <= shares[tier] * max_tokens:
            used[tier] += cost[m.ref]
            chosen.add(m.ref)
    left = max_tokens - sum(used.values())
    for m in ranked:
        if m.ref not in chosen and cost[m.ref] <= left:
            left -= cost[m.ref]
            chosen.add(m.ref)
    return [m for m in ranked if m.ref in chosen]
