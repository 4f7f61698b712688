"""The MemorySelector: which blocks fit the token budget, and why the others do not.

The policy: CRITICAL blocks are always kept (more than the budget is an error);
then HIGH, MEDIUM and LOW, each tier by relevance, then newest first, while the
running total stays under 80 %, 90 % and 95 % of the budget (`budget.TIER_LIMITS`).
An expired block is dropped as such. Nothing is read here: a block costs what
`estimates.TokenEstimates` says, from the loader's cache or the file's size.

Speed: a think-cycle selects over the same blocks again and again, so what
depends only on the blocks (facts, tiers, drop records) is kept between calls
(`_Facts`, `_Layout`, at the end of this module) and each call is a handful of
passes in C (map, sorts on float keys); 10 000 blocks take a few milliseconds.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from itertools import compress, count, repeat
from operator import attrgetter, eq, is_, le, mul, neg
from typing import Any, cast

from hivemind.errors import CriticalOverBudgetError
from hivemind.memory.blocks import AnyBlock, BlockType, Priority
from hivemind.memory.budget import DEFAULT_MAX_BLOCK_TOKENS, TIER_LIMITS, block_cap
from hivemind.memory.estimates import Batch, Cost, TokenEstimates
from hivemind.memory.loader import ContentLoader, StatKey
from hivemind.memory.relevance import RelevanceScorer, epoch_seconds
from hivemind.memory.restamp import same_but_timestamp
from hivemind.memory.tokens import TokenCounter


@dataclass(slots=True)
class Dropped:
    """A block left out of the context, and why."""

    block: AnyBlock
    reason: str
    tokens: int


@dataclass
class Selection:
    """What the selector kept and dropped; `tokens` are estimates incl. the JSON envelope."""

    kept: list[AnyBlock]
    dropped: list[Dropped]
    tokens: dict[str, int]
    scores: dict[str, float]
    budget: int
    used: int

    def tokens_by_type(self) -> dict[BlockType, int]:
        """Estimated tokens of the kept blocks, per block type."""
        out: dict[BlockType, int] = {}
        for b in self.kept:
            out[b.type] = out.get(b.type, 0) + self.tokens.get(b.id, 0)
        return out

    def dropped_tokens_by_type(self) -> dict[BlockType, int]:
        """Estimated tokens of the dropped blocks, per block type."""
        out: dict[BlockType, int] = {}
        for d in self.dropped:
            out[d.block.type] = out.get(d.block.type, 0) + d.tokens
        return out


class MemorySelector:
    """Chooses the blocks that fit a budget, by priority tier and relevance."""

    def __init__(
        self,
        loader: ContentLoader,
        counter: TokenCounter,
        scorer: RelevanceScorer | None = None,
        max_block_tokens: int | None = DEFAULT_MAX_BLOCK_TOKENS,
        *,
        stat_ttl: float = 1.0,
    ) -> None:
        self.loader = loader
        self.counter = counter
        self.scorer = scorer or RelevanceScorer()
        # The builder compresses any non-ROM block above this, so it never costs more;
        # None when the builder has no compressor. The estimates count blocks under the
        # cap for the budget of the last selection (`block_cap`).
        self.max_block_tokens = max_block_tokens
        self.estimates = TokenEstimates(loader, counter, max_block_tokens)
        # Estimates trust a file's stat for this long (seconds); 0 = stat every time.
        self.stat_ttl = stat_ttl
        self._facts: dict[int, _Facts] = {}
        # The facts last learned per block id: a block made again with only a new time
        # (perception stamps its blocks) takes them over.
        self._latest: dict[str, _Facts] = {}
        self._last: _Layout | None = None
        self._counts: deque[int] = deque(maxlen=32)  # blocks in recent layouts

    def select(
        self, blocks: Iterable[AnyBlock], budget: int, now: datetime | None = None
    ) -> Selection:
        """Keep CRITICAL, then each tier while under its share of `budget`; say why others go."""
        if budget <= 0:
            raise ValueError(f"budget must be positive, got {budget}")
        blocks = blocks if isinstance(blocks, list) else list(blocks)
        # A new budget (a ROM edit) may change the cap: costs learnt under the old are wrong.
        if self.estimates.set_cap(block_cap(budget, self.max_block_tokens)):
            self._facts, self._latest, self._last = {}, {}, None
        now_s = epoch_seconds(now or self.scorer.now())
        sel = Selection(kept=[], dropped=[], tokens={}, scores={}, budget=budget, used=0)
        lay = self._layout(blocks, now_s, sel)  # the expired are dropped here
        ns = self._sizes(lay)
        expired, sel.tokens = sel.tokens, lay.tokens.copy()  # a copy is a memcpy, not 10k inserts
        sel.tokens.update(expired)
        scores = self._scores(lay, now_s)
        sel.scores.update(zip(lay.ids, scores, strict=True))
        # CRITICAL: all of it, whatever its relevance.
        critical = lay.by_ts[0]
        used = sum(map(ns.__getitem__, critical))
        if used > budget:
            raise CriticalOverBudgetError({lay.ids[i]: ns[i] for i in critical}, budget)
        sel.kept.extend(lay.live[i].block for i in critical)
        # Each other tier in rank order, while the total stays under the tier's share.
        ranking, fresh = self._rank(lay, scores, now_s)
        outcome = (budget, lay.batch.version)
        if not fresh and lay.outcome[0] == outcome and ranking == lay.ranked:
            # Same order, same sizes, same budget: the greedy fill would decide the same.
            sel.kept[len(critical):] = lay.outcome[1]
            sel.dropped.extend(lay.outcome[2])
            sel.used = lay.outcome[3]
            return sel
        lay.ranked = ranking
        first_kept, first_dropped = len(sel.kept), len(sel.dropped)
        for tier, (priority, percent) in enumerate(TIER_LIMITS.items(), start=1):
            used = _fill(ranking[tier], lay, tier, priority=priority, percent=percent,
                         used=used, sel=sel)
        sel.used = used
        lay.outcome = (outcome, sel.kept[first_kept:], sel.dropped[first_dropped:], used)
        return sel

    def estimate(self, block: AnyBlock, stats: dict[str, StatKey | None] | None = None) -> int:
        """Estimated tokens of `block` in the context, envelope included; reads nothing.
        A block over the cap counts as compressed (the cap of the last selection's budget)."""
        return self.estimates.estimate(block, stats)

    def _rank(
        self, lay: _Layout, scores: list[float], now_s: float
    ) -> tuple[list[list[int]], bool]:
        """Each tier's live blocks by (-score, -timestamp, input order); True if ranked
        afresh rather than from the last ranking."""
        neg_scores = list(map(neg, scores))
        # by_ts is (-timestamp, input order); a stable sort on the score (a float key:
        # Timsort's fast path) makes it (-score, -timestamp, input order). Re-sorting the
        # last ranking gives the same order in linear time, unless the weights changed
        # or the clock went back: then scores may tie that did not before.
        fresh = lay.ranked_at[0] != self.scorer.generation or lay.ranked_at[1] > now_s
        lay.ranked_at = (self.scorer.generation, now_s)
        ranking = [
            sorted(lay.by_ts[t] if fresh else lay.ranked[t], key=neg_scores.__getitem__)
            for t in range(4)
        ]
        return ranking, fresh

    def _sizes(self, lay: _Layout) -> list[int]:
        """Tokens of each live block (see `TokenEstimates.sizes`)."""
        ns = self.estimates.sizes(lay.batch, self.stat_ttl)
        if ns is not lay.ns:
            lay.ns, lay.tokens = ns, dict(zip(lay.ids, ns, strict=True))
            lay.segments.clear()  # their records name the old sizes
        return ns

    def _layout(self, blocks: list[AnyBlock], now_s: float, sel: Selection) -> _Layout:
        """The facts of every block (learning new or changed ones); the expired dropped."""
        lay = self._last
        # Fast path: the very same block objects, none assigned to since the last call.
        if not (
            lay is not None
            and len(lay.blocks) == len(blocks)
            and all(map(is_, blocks, lay.blocks))
            and all([b.__dict__ is d for b, d in zip(blocks, lay.dicts, strict=True)])
        ):
            facts = self._facts
            fl: list[_Facts | None] = list(map(facts.get, map(id, blocks)))
            for i, (f, b) in enumerate(zip(fl, blocks, strict=True)):
                if f is None or f.dict is not b.__dict__:
                    fl[i] = facts[id(b)] = self._learn(b)
            known = cast(list[_Facts], fl)
            lay = self._last = _Layout(blocks, known, known, self.estimates)
            self._counts.append(len(blocks))
            # Forget blocks no longer in memory, with room for agents sharing this selector.
            if len(facts) > 2 * max(self._counts) + 4096:
                self._facts = dict(zip(map(id, blocks), known, strict=True))
            if len(self._latest) > 2 * max(self._counts) + 4096:
                self._latest = {f.id: f for f in known}
        if lay.min_expiry > now_s:
            return lay
        live: list[_Facts] = []
        for f in lay.facts:
            if f.expiry <= now_s:
                sel.tokens[f.id] = 0
                sel.dropped.append(Dropped(f.block, "expired", 0))
            else:
                live.append(f)
        return _Layout(blocks, lay.facts, live, self.estimates)  # not remembered: the time decides

    def _learn(self, block: AnyBlock) -> _Facts:
        prev = self._latest.get(block.id)
        if (
            prev is not None
            and type(prev.block) is type(block)
            and same_but_timestamp(prev.dict, block.__dict__)
        ):
            f = prev.restamped(block)
        else:
            f = _Facts(block, self.estimates.cost(block), self.scorer)
        self._latest[block.id] = f
        return f

    def _scores(self, lay: _Layout, now_s: float) -> list[float]:
        """The relevance of every live block at `now_s` (scorer.score, computed in bulk)."""
        scorer = self.scorer
        gen, scale = scorer.generation, scorer.recency_seconds
        if lay.weights[0] != gen or lay.weights[1] != scale:
            live = lay.live
            boosts = scorer.boosts(list(map(_f_words, live)), list(map(_f_file, live)))
            weights = list(map(mul, map(_f_conf, live), boosts))
            lay.weights = (gen, scale, [w * scale for w in weights], weights)
        cap = scorer.weights.cap
        if lay.timestamps and max(lay.timestamps) >= now_s:  # a block from the future
            return [scorer.combine(w, now_s - t, 1.0)
                    for w, t in zip(lay.weights[3], lay.timestamps, strict=True)]
        # weight × scale / (scale + age): the same float operations as scorer.combine.
        pairs = zip(lay.weights[2], lay.timestamps, strict=True)
        if cap is None:
            return [w / (scale + (now_s - t)) for w, t in pairs]
        return [s if (s := w / (scale + (now_s - t))) < cap else cap for w, t in pairs]


def _fill(
    ranked: list[int], lay: _Layout, tier: int, *, priority: Priority, percent: int, used: int,
    sel: Selection,
) -> int:
    """Greedy over one tier in rank order; returns the new running total.

    Between two kept blocks, the blocks that do not fit are found by a scan in C and
    dropped as one run (listed in input order); an unchanged run reuses its records
    from the last call.
    """
    ns, live, budget = lay.ns, lay.live, sel.budget
    limit = budget * percent  # compare in hundredths: no float rounding at the edge
    head = f"over budget at {priority.name}: "
    sizes = list(map(ns.__getitem__, ranked))
    kept, dropped, end, start = sel.kept, sel.dropped, len(ranked), 0
    total = used + sum(sizes)
    if total * 100 < limit:  # room for the whole tier: each block fits when its turn comes
        kept.extend(live[i].block for i in ranked)
        return total
    while start < end:
        tail = _tail(percent, budget, used)
        most = (limit - used * 100 - 1) // 100  # the largest block that still fits
        fits = compress(count(start), map(le, map(sizes.__getitem__, range(start, end)),
                                          repeat(most)))
        nxt = next(fits, end)
        if nxt > start:
            run = ranked[start:nxt]
            memo = lay.segments.get((tier, tail))
            # Scores drift with the clock and may swap two neighbours, but the same set
            # of blocks dropped at the same total is the same run (listed in input order).
            if memo is None or (memo[0] != run and memo[1] != set(run)):
                if len(lay.segments) > 4096:  # totals that no longer occur
                    lay.segments.clear()
                memo = lay.segments[(tier, tail)] = [
                    run, set(run), [_drop(live[i], ns[i], head, tail) for i in sorted(run)]
                ]
            memo[0] = run
            dropped.extend(memo[2])
        if nxt < end:
            kept.append(live[ranked[nxt]].block)
            used += sizes[nxt]
        start = nxt + 1
    return used


def _drop(f: _Facts, n: int, head: str, tail: str) -> Dropped:
    """The record of dropping `f`; the same object while the reason stays the same."""
    d = f.drop
    if d is None or d.tokens != n or f.drop_tail != tail:  # the tail names tier, budget, total
        d = f.drop = Dropped(f.block, head + str(n) + tail, n)
        f.drop_tail = tail
    return d


def _tail(percent: int, budget: int, used: int) -> str:
    return f" tokens would pass {percent} % of {budget} ({used} already used)"


# -- what is kept between calls ----------------------------------------------


class _Facts:
    """What the selector knows of one version of a block, computed once.

    Pydantic replaces a block's `__dict__` on every assignment (validate_assignment),
    so holding the old dict is an exact and cheap "unchanged?" test. Mutating a
    dict-valued field in place (`metadata[...] = ...`) is not seen; it only moves
    the estimate of the JSON envelope.
    """

    __slots__ = ("block", "conf", "cost", "dict", "drop", "drop_tail", "expiry", "file", "id",
                 "tier", "ts", "words")

    def __init__(self, block: AnyBlock, cost: Cost, scorer: RelevanceScorer) -> None:
        self.block = block
        self.dict = block.__dict__
        self.id = block.id
        self.cost = cost
        self.tier = _TIER_INDEX[block.priority]
        self.ts = epoch_seconds(block.timestamp)
        self.expiry = math.inf if block.expiry is None else epoch_seconds(block.expiry)
        self.conf = block.confidence
        self.drop: Dropped | None = None  # the last record of dropping this block
        self.drop_tail = ""
        self.words = scorer.words(block)  # what relevance needs, whatever the task
        self.file = block.file_path()

    def restamped(self, block: AnyBlock) -> _Facts:
        """These facts for `block`, whose fields are these but for its timestamp: only
        the recency changes (the estimate, tier and relevance weight do not)."""
        f = _Facts.__new__(_Facts)
        f.block, f.dict, f.id, f.cost, f.tier = block, block.__dict__, self.id, self.cost, self.tier
        f.ts = epoch_seconds(block.timestamp)
        f.expiry, f.conf = self.expiry, self.conf
        f.drop, f.drop_tail = None, ""
        f.words, f.file = self.words, self.file
        return f


# Tier 0 is CRITICAL; 1..3 are TIER_LIMITS in order.
_TIER_INDEX = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.MEDIUM: 2, Priority.LOW: 3}
_f_id, _f_cost, _f_expiry, _f_ts, _f_tier = (
    attrgetter(a) for a in ("id", "cost", "expiry", "ts", "tier")
)
_f_words, _f_file, _f_conf = (attrgetter(a) for a in ("words", "file", "conf"))


class _Layout:
    """What depends only on one list of block versions; reused while the list is the same."""

    __slots__ = ("batch", "blocks", "by_ts", "dicts", "facts", "ids", "live", "min_expiry", "ns",
                 "outcome", "ranked", "ranked_at", "segments", "timestamps", "tokens", "weights")

    def __init__(
        self, blocks: list[AnyBlock], facts: list[_Facts], live: list[_Facts],
        estimates: TokenEstimates,
    ) -> None:
        self.blocks = blocks
        self.dicts = [f.dict for f in facts]
        self.facts = facts  # every block, expired included
        self.live = live
        self.timestamps: list[float] = list(map(_f_ts, live))
        # (scorer generation, scale, weight × scale, weight); weight = confidence × boost
        self.weights: tuple[int, float, list[float], list[float]] = (-1, 0.0, [], [])
        self.min_expiry = min(map(_f_expiry, facts), default=math.inf)
        self.ids: list[str] = list(map(_f_id, live))
        self.batch: Batch = estimates.batch(list(map(_f_cost, live)))
        self.ns: list[int] = []  # tokens per live block; `tokens` by id
        self.tokens: dict[str, int] = {}
        neg_ts = [-t for t in map(_f_ts, live)]
        tier_of = list(map(_f_tier, live))
        # Per tier: indices by (-timestamp, input order); CRITICAL stays in input order.
        self.by_ts: list[list[int]] = []
        for t in range(4):
            members = list(compress(count(), map(eq, tier_of, repeat(t))))
            if t:
                members.sort(key=neg_ts.__getitem__)
            self.by_ts.append(members)
        self.ranked: list[list[int]] = list(self.by_ts)  # the last ranking, per tier
        self.ranked_at = (-1, math.inf)  # (scorer generation, time) of that ranking
        # ((budget, estimates version), kept after CRITICAL, tier drops, total) of the
        # last fill
        self.outcome: tuple[tuple[int, int], list[AnyBlock], list[Dropped], int] = (
            (-1, -1), [], [], 0
        )
        # (tier, reason tail) -> [indices as ranked, the same as a set, records in input
        # order] of a run of drops between two keeps
        self.segments: dict[tuple[int, str], list[Any]] = {}
