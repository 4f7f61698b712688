"""Token estimates of blocks, reading no file: what the selector counts a block as.

A block costs its envelope plus its text. Inline text is counted; a file's is
estimated by the loader (from its cache, else the file's size) once per file and
line range, and estimated again when the file's stat changes. A block over the
cap counts as compressed to it, unless it is sent whole or not at all (ROM).
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from operator import add, attrgetter
from typing import Any

from hivemind.memory.blocks import AnyBlock, Span
from hivemind.memory.budget import envelope_tokens
from hivemind.memory.loader import ContentLoader, StatKey
from hivemind.memory.tokens import TokenCounter


@dataclass(slots=True)
class Cost:
    """What one block version costs, but for the text of its file."""

    span: Span | None  # the file and line range its text is loaded from
    key: str | None  # names (file, range, cap); None for an inline block
    base: int  # the envelope, plus the text of an inline block
    cap: int | None  # the most its file's text counts for (None: no cap)


_key_of, _base_of = attrgetter("key"), attrgetter("base")


class Batch:
    """The estimates of one list of blocks, kept with the list while it is the same."""

    __slots__ = ("bases", "costs", "keys", "ns", "paths", "stat_at", "version")

    def __init__(self, costs: list[Cost]) -> None:
        self.costs = costs
        self.keys: list[str | None] = list(map(_key_of, costs))
        self.bases: list[int] = list(map(_base_of, costs))
        self.paths: set[str] = {c.span[0] for c in costs if c.span is not None}
        self.stat_at = (-math.inf, -1)  # (monotonic time, loader generation) of the last stat
        self.ns: list[int] = []  # tokens per block, as of `version`
        self.version = -1


class TokenEstimates:
    """Estimated tokens of blocks in the context; remembered per file and line range,
    so agents sharing one keep one estimate of each file."""

    def __init__(
        self, loader: ContentLoader, counter: TokenCounter, cap: int | None = None
    ) -> None:
        self.loader = loader
        self.counter = counter
        self.cap = cap  # a block over it counts as compressed to it
        # Per file: (version, {key: estimate}); _known merges them all (one dict lookup
        # per block).
        self._files: dict[str, tuple[tuple[Any, ...], dict[str, int]]] = {}
        self._known: dict[str | None, int] = {None: 0}
        self.version = 0  # bumped whenever an estimate changes
        self._counts: deque[int] = deque(maxlen=32)  # files in recent batches

    def set_cap(self, cap: int | None) -> bool:
        """Count blocks as compressed to `cap`; True if it changed (estimates made and
        costs given under the old cap are wrong: all are forgotten)."""
        if cap == self.cap:
            return False
        self.cap = cap
        self._files, self._known = {}, {None: 0}
        self.version += 1
        return True

    def cost(self, block: AnyBlock) -> Cost:
        """The cost of `block` that does not depend on its file's text."""
        span = block.span()
        cap = self.cap if block.compressible else None
        if span is None:
            n = self.counter.count_json(block.inline_content())
            n = n if cap is None or n <= cap else cap
            return Cost(None, None, n + envelope_tokens(block, None), cap)
        path, start, end = span
        # One string per (file, range, capped?): str hashes are cached, tuples' are not.
        key = f"{'R' if cap is None else 'B'}{start}:{end}:{path}"
        return Cost(span, key, envelope_tokens(block, path), cap)

    def estimate(self, block: AnyBlock, stats: dict[str, StatKey | None] | None = None) -> int:
        """Estimated tokens of `block` in the context, envelope included; reads nothing."""
        cost = self.cost(block)
        if cost.span is None:
            return cost.base
        n = self.loader.estimate_location(*cost.span, stats)
        return cost.base + (n if cost.cap is None or n <= cost.cap else cost.cap)

    def batch(self, costs: list[Cost]) -> Batch:
        """The estimates of a list of blocks, to be kept with it (see `sizes`)."""
        batch = Batch(costs)
        self._counts.append(len(batch.paths))
        return batch

    def sizes(self, batch: Batch, stat_ttl: float) -> list[int]:
        """Tokens of each block of `batch`; the same list while no estimate changed.

        Files are stat-ed again after `stat_ttl` seconds (or when the loader has read
        something): loading always stats and the builder enforces the budget with
        real counts, so a file edited within that time costs at worst one cycle with
        a stale estimate.
        """
        at, generation = batch.stat_at
        stats: dict[str, StatKey | None] = {}  # this call's stats: each file's taken once
        if time.monotonic() - at >= stat_ttl or generation != self.loader.generation:
            batch.stat_at = (time.monotonic(), self.loader.generation)
            self._restat(batch.paths, stats)
        if batch.version == self.version:
            return batch.ns
        known = self._known
        if not known.keys() >= set(batch.keys):  # new files or ranges: estimate each once
            self._restat(batch.paths - self._files.keys(), stats)
            loader = self.loader
            for key, c in zip(batch.keys, batch.costs, strict=True):
                if key is not None and key not in known and c.span is not None:
                    path, start, end = c.span
                    n = loader.estimate_location(path, start, end, stats)
                    cap = c.cap
                    known[key] = self._files[path][1][key] = (
                        n if cap is None or n <= cap else cap
                    )
            self.version += 1
        batch.ns = list(map(add, map(known.__getitem__, batch.keys), batch.bases))
        batch.version = self.version
        return batch.ns

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
        if len(files) > 4 * max(self._counts, default=0) + 4096:  # files no longer in view
            for path in files.keys() - paths:
                for key in files.pop(path)[1]:
                    del known[key]
            changed = True
        if changed:
            self.version += 1
