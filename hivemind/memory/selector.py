"""The MemorySelector: which blocks fit the token budget, and why the others do not.

CRITICAL blocks are always kept; HIGH, MEDIUM and LOW follow while the running
total stays under 80 %, 90 % and 95 % of the budget, each tier by relevance,
then newest first. Nothing is read here: file-backed blocks are estimated by
the loader from its cache or the file's size.

Speed: a think-cycle selects over the same blocks again and again, so what
depends only on the blocks (facts, estimates, tiers, drop records) is kept
between calls and each call is a handful of passes in C (map, sorts on float
keys); 10 000 blocks take a few milliseconds.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from itertools import compress, count, repeat
from operator import add, attrgetter, eq, is_, le, mul, neg
from typing import Any, cast

from hivemind.errors import CriticalOverBudgetError
from hivemind.memory.blocks import AnyBlock, BlockType, Priority, Span
from hivemind.memory.budget import (
    DEFAULT_MAX_BLOCK_TOKENS,
    TIER_LIMITS,
    block_cap,
    envelope_tokens,
)
from hivemind.memory.loader import ContentLoader, StatKey
from hivemind.memory.relevance import RelevanceScorer, epoch_seconds, file_of
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


class _Facts:
    """What the selector knows of one version of a block, computed once.

    Pydantic replaces a block's `__dict__` on every assignment (validate_assignment),
    so holding the old dict is an exact and cheap "unchanged?" test. Mutating a
    dict-valued field in place (`metadata[...] = ...`) is not seen; it only moves
    the estimate of the JSON envelope.
    """

    __slots__ = (
        "base", "block", "conf", "dict", "drop", "drop_tail", "expiry", "file", "id", "key",
        "loc", "path", "tier", "ts", "words",
    )

    def __init__(
        self, block: AnyBlock, loc: Span | None, base: int, scorer: RelevanceScorer
    ) -> None:
        self.block = block
        self.dict = block.__dict__
        self.id = block.id
        self.loc = loc
        self.path = None if loc is None else loc[0]
        # One string per (file, range, capped?): str hashes are cached, tuples' are not.
        self.key = None if loc is None else (
            f"{'B' if block.compressible else 'R'}{loc[1]}:{loc[2]}:{loc[0]}"
        )
        self.base = base  # envelope, plus the content for inline blocks
        self.tier = _TIER_INDEX[block.priority]
        self.ts = epoch_seconds(block.timestamp)
        self.expiry = math.inf if block.expiry is None else epoch_seconds(block.expiry)
        self.conf = block.confidence
        self.drop: Dropped | None = None  # the last record of dropping this block
        self.drop_tail = ""
        self.words = scorer.words(block)  # what relevance needs, whatever the task
        self.file = file_of(block)

    def restamped(self, block: AnyBlock) -> _Facts:
        """These facts for `block`, whose fields are these but for its timestamp: only
        the recency changes (the estimate, tier and relevance weight do not)."""
        f = _Facts.__new__(_Facts)
        f.block, f.dict, f.id = block, block.__dict__, self.id
        f.loc, f.path, f.key, f.base, f.tier = self.loc, self.path, self.key, self.base, self.tier
        f.ts = epoch_seconds(block.timestamp)
        f.expiry, f.conf = self.expiry, self.conf
        f.drop, f.drop_tail = None, ""
        f.words, f.file = self.words, self.file
        return f


# Tier 0 is CRITICAL; 1..3 are TIER_LIMITS in order.
_TIER_INDEX = {Priority.CRITICAL: 0, Priority.HIGH: 1, Priority.MEDIUM: 2, Priority.LOW: 3}
_f_id, _f_key, _f_base = (attrgetter(a) for a in ("id", "key", "base"))
_f_expiry, _f_ts, _f_tier, _f_path = (attrgetter(a) for a in ("expiry", "ts", "tier", "path"))
_f_words, _f_file, _f_conf = (attrgetter(a) for a in ("words", "file", "conf"))


class _Layout:
    """What depends only on one list of block versions; reused while the list is the same."""

    __slots__ = ("blocks", "by_ts", "dicts", "facts", "ids", "keys", "live", "min_expiry", "ns",
                 "ns_version", "outcome", "paths", "ranked", "ranked_at", "segments", "stat_at",
                 "timestamps", "tokens", "weights")

    def __init__(self, blocks: list[AnyBlock], facts: list[_Facts], live: list[_Facts]) -> None:
        self.blocks = blocks
        self.dicts = [f.dict for f in facts]
        self.facts = facts  # every block, expired included
        self.live = live
        self.timestamps: list[float] = list(map(_f_ts, live))
        # (scorer generation, scale, weight × scale, weight); weight = confidence × boost
        self.weights: tuple[int, float, list[float], list[float]] = (-1, 0.0, [], [])
        self.min_expiry = min(map(_f_expiry, facts), default=math.inf)
        self.ids: list[str] = list(map(_f_id, live))
        self.keys: list[str | None] = list(map(_f_key, live))
        self.paths: set[str] = {p for p in map(_f_path, live) if p is not None}
        self.ns: list[int] = []
        self.ns_version = -1
        self.stat_at = (-math.inf, -1)  # (monotonic time, loader generation) of the last stat
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
        # ((budget, ns_version), kept after CRITICAL, tier drops, total) of the last fill
        self.outcome: tuple[tuple[int, int], list[AnyBlock], list[Dropped], int] = (
            (-1, -1), [], [], 0
        )
        # (tier, reason tail) -> [indices as ranked, the same as a set, records in input
        # order] of a run of drops between two keeps
        self.segments: dict[tuple[int, str], list[Any]] = {}


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
        # None when the builder has no compressor. `_cap` is the cap for the budget of
        # the last selection (`block_cap`): the estimates below are counted under it.
        self.max_block_tokens = max_block_tokens
        self._cap = max_block_tokens
        # Estimates trust a file's stat for this long (seconds). Loading always stats and
        # the builder enforces the budget with real counts, so a file edited within the
        # window costs at worst one cycle with a stale estimate. 0 = stat every time.
        self.stat_ttl = stat_ttl
        self._facts: dict[int, _Facts] = {}
        # The facts last learned per block id: a block made again with only a new time
        # (perception stamps its blocks) takes them over.
        self._latest: dict[str, _Facts] = {}
        self._last: _Layout | None = None
        # Per file: (version, {key: estimate}); _known merges them all (one dict lookup
        # per block). Both outlive the block lists, so agents sharing a selector share them.
        self._files: dict[str, tuple[tuple[Any, ...], dict[str, int]]] = {}
        self._known: dict[str | None, int] = {None: 0}
        self._known_version = 0  # bumped whenever _known changes
        self._sizes: deque[tuple[int, int]] = deque(maxlen=32)  # recent (blocks, files)

    # -- estimates -----------------------------------------------------------
    def estimate(self, block: AnyBlock, stats: dict[str, StatKey | None] | None = None) -> int:
        """Estimated tokens of `block` in the context, envelope included; reads nothing.
        A block over the cap counts as compressed (the cap of the last selection's budget)."""
        loc = block.span()
        if loc is None:
            return self._inline_tokens(block) + envelope_tokens(block, None)
        n = self._capped(block, self.loader.estimate_location(*loc, stats))
        return n + envelope_tokens(block, loc[0])

    def _capped(self, block: AnyBlock, n: int) -> int:
        cap = self._cap
        if cap is not None and n > cap and block.compressible:
            return cap
        return n

    def _inline_tokens(self, block: AnyBlock) -> int:
        return self._capped(block, self.counter.count_json(block.inline_content()))

    def _learn(self, block: AnyBlock) -> _Facts:
        prev = self._latest.get(block.id)
        if (
            prev is not None
            and type(prev.block) is type(block)
            and same_but_timestamp(prev.dict, block.__dict__)
        ):
            f = prev.restamped(block)
        else:
            loc = block.span()
            scorer = self.scorer
            if loc is None:
                base = self._inline_tokens(block) + envelope_tokens(block, None)
                f = _Facts(block, None, base, scorer)
            else:
                f = _Facts(block, loc, envelope_tokens(block, loc[0]), scorer)
        self._latest[block.id] = f
        return f

    # -- selection -----------------------------------------------------------
    def select(
        self, blocks: Iterable[AnyBlock], budget: int, now: datetime | None = None
    ) -> Selection:
        """Keep CRITICAL, then each tier while under its share of `budget`; say why others go."""
        if budget <= 0:
            raise ValueError(f"budget must be positive, got {budget}")
        blocks = blocks if isinstance(blocks, list) else list(blocks)
        cap = block_cap(budget, self.max_block_tokens)
        if cap != self._cap:  # a new budget (a ROM edit): estimates made under the old
            self._cap = cap  # cap are wrong, learn them again
            self._forget()
        now_s = epoch_seconds(now or self.scorer.now())
        sel = Selection(kept=[], dropped=[], tokens={}, scores={}, budget=budget, used=0)
        lay = self._layout(blocks, now_s, sel)
        ns = self._estimates(lay)
        expired, sel.tokens = sel.tokens, lay.tokens.copy()  # a copy is a memcpy, not 10k inserts
        sel.tokens.update(expired)
        scores = self._scores(lay, now_s)
        sel.scores.update(zip(lay.ids, scores, strict=True))
        critical = lay.by_ts[0]
        used = sum(map(ns.__getitem__, critical))
        if used > budget:
            raise CriticalOverBudgetError({lay.ids[i]: ns[i] for i in critical}, budget)
        sel.kept.extend(lay.live[i].block for i in critical)
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
        # Same order, same sizes, same budget: the greedy fill would decide the same.
        outcome = (budget, lay.ns_version)
        if not fresh and lay.outcome[0] == outcome and ranking == lay.ranked:
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

    def _forget(self) -> None:
        self._facts, self._latest, self._last = {}, {}, None
        self._files, self._known = {}, {None: 0}
        self._known_version += 1

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
            lay = self._last = _Layout(blocks, known, known)
            self._sizes.append((len(blocks), len(lay.paths)))
            # Forget blocks no longer in memory, with room for agents sharing this selector.
            if len(facts) > 2 * max(n for n, _ in self._sizes) + 4096:
                self._facts = dict(zip(map(id, blocks), known, strict=True))
            if len(self._latest) > 2 * max(n for n, _ in self._sizes) + 4096:
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
        return _Layout(blocks, lay.facts, live)  # not remembered: the time decides

    def _estimates(self, lay: _Layout) -> list[int]:
        """Tokens of each live block: inline counts, or one estimate per file and range."""
        at, generation = lay.stat_at
        stats: dict[str, StatKey | None] = {}  # this call's stats: each file's taken once
        if time.monotonic() - at >= self.stat_ttl or generation != self.loader.generation:
            lay.stat_at = (time.monotonic(), self.loader.generation)
            self._restat(lay.paths, stats)
        if lay.ns_version == self._known_version:
            return lay.ns
        known = self._known
        if not known.keys() >= set(lay.keys):  # new files or ranges: estimate each once
            self._restat(lay.paths - self._files.keys(), stats)
            for f in lay.live:
                key, loc = f.key, f.loc
                if key is not None and key not in known and loc is not None:
                    est = self.loader.estimate_location(loc[0], loc[1], loc[2], stats)
                    known[key] = self._files[loc[0]][1][key] = self._capped(f.block, est)
            self._known_version += 1
        lay.ns = list(map(add, map(known.__getitem__, lay.keys), map(_f_base, lay.live)))
        lay.ns_version = self._known_version
        lay.segments.clear()  # their records name the old sizes
        lay.tokens = dict(zip(lay.ids, lay.ns, strict=True))
        return lay.ns

    def _restat(self, paths: set[str], stats: dict[str, StatKey | None]) -> None:
        """Stat `paths` (one stat each, kept in `stats`); forget the estimates of files
        that changed."""
        files, known = self._files, self._known
        changed = False
        for path, version in self.loader.versions(paths, stats).items():
            memo = files.get(path)
            if memo is None:
                files[path] = (version, {})
            elif memo[0] != version:
                for key in memo[1]:
                    del known[key]
                files[path] = (version, {})
                changed = True
        if len(files) > 4 * max((n for _, n in self._sizes), default=0) + 4096:
            for path in files.keys() - paths:
                for key in files.pop(path)[1]:
                    del known[key]
            changed = True
        if changed:
            self._known_version += 1

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

