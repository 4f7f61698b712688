"""The memories worth ranking for a question, with their full-text scores.

Besides the best BM25 matches of the question's words (`analysis.query_terms`):

- **people**: a name in the question ("Ana") also looks for the role memories give
  that person ("my sister Ana" → "sister"), since later turns say "my sister";
- **days**: a time phrase ("the Tuesday after we talked about the kitchen", "on
  March 14") is cut out of the words searched; its anchor is found by its own
  words, and the matches from the days it points at join the candidates;
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from hivemind.ltm import people, when
from hivemind.ltm.analysis import query_terms
from hivemind.ltm.backend import Filters, MemoryBackend
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.scopes import MemoryRef

MAX_NAMES = 3
"""Names of a question looked up (each one small search)."""


@dataclass
class Candidates:
    records: dict[MemoryRef, MemoryRecord] = field(default_factory=dict)
    bm25: dict[MemoryRef, float] = field(default_factory=dict)
    """Full-text score; absent = no match at all."""
    window: when.Window | None = None
    """The days the question points at, if it names any."""
    terms: list[str] = field(default_factory=list)

    def add(self, found: list[tuple[MemoryRecord, float]]) -> None:
        for record, score in found:
            self.records.setdefault(record.ref, record)
            self.bm25[record.ref] = max(score, self.bm25.get(record.ref, 0.0))


def gather(
    backend: MemoryBackend, query: str, scope: Filters, *, at: datetime, pool: int
) -> Candidates:
    """Candidates for `query` in `scope` asked at `at`: up to about 2×`pool`."""
    ask = when.parse(query, at)
    terms = query_terms(ask.rest if ask is not None else query)
    terms += [t for t in _roles(backend, query, scope) if t not in terms]
    out = Candidates(terms=terms)
    if terms:
        out.add(backend.search(terms, scope, limit=pool))
    if ask is not None:
        out.window = when.resolve(ask, _anchor_day(backend, ask, scope))
        if out.window is not None:
            days = {"$and": [scope, {"created_at": {"$gte": out.window.start(),
                                                    "$lt": out.window.end()}}]}  # fmt: skip
            if terms:
                out.add(backend.search(terms, days, limit=pool))
            for record in backend.query(days, limit=pool, order_by="created_at"):
                out.records.setdefault(record.ref, record)
    return out


def _roles(backend: MemoryBackend, query: str, scope: Filters) -> list[str]:
    """The words of the roles memories give the people `query` names."""
    out: list[str] = []
    for name in people.names(query)[:MAX_NAMES]:
        found = backend.search([name.lower()], scope, limit=20)
        for role in people.roles(name, (r.content for r, _ in found))[:1]:
            out.extend(query_terms(role))
    return out


def _anchor_day(backend: MemoryBackend, ask: when.TimeAsk, scope: Filters) -> date | None:
    """The day of the best match of the anchor's words."""
    if ask.anchor is None:
        return None
    terms = query_terms(ask.anchor)
    found = backend.search(terms, scope, limit=1) if terms else []
    return found[0][0].created_at.astimezone(UTC).date() if found else None
