"""The memories worth ranking for a question, with their full-text scores.

Besides the best BM25 matches of the question's words (`analysis.query_terms`):

- **people**: a name in the question ("Ana") also looks for the role memories give
  that person ("my sister Ana" → "sister"), since later turns say "my sister";
- **days**: a time phrase ("the Tuesday after we talked about the kitchen", "on
  March 14") is cut out of the words searched; its anchor is found by its own
  words, and the matches from the days it points at join the candidates;
- **neighbours**: a turn right after a strong match that refers back ("she", "it",
  "there") gets a share of the match's score for the question's words it lacks
  ("Had lunch with my sister." then "She got the job at the bakery.").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Protocol, runtime_checkable

from hivemind.ltm import people, when
from hivemind.ltm.analysis import STOP_WORDS, query_terms, stem, words
from hivemind.ltm.backend import Filters, MemoryBackend
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.scopes import MemoryRef

NEIGHBOUR_SHARE = 0.15
"""Share of a match's score its following turns carry."""
NEIGHBOUR_TURNS = 2
"""How many turns after a match are its neighbours."""
NEIGHBOUR_SPAN = timedelta(minutes=10)
"""…if written within this long after it (a turn of the same conversation)."""
NEIGHBOUR_SOURCES = 8
"""The best matches whose neighbours are looked at."""
MAX_NAMES = 3
"""Names of a question looked up (each one small search)."""
_ANAPHOR_TEXT = "she he her him his hers they them their theirs it its that this those these there"
_ANAPHORS = frozenset(_ANAPHOR_TEXT.split())


@dataclass
class Candidates:
    records: dict[MemoryRef, MemoryRecord] = field(default_factory=dict)
    bm25: dict[MemoryRef, float] = field(default_factory=dict)
    """Full-text score, neighbours' shares included; absent = no match at all."""
    window: when.Window | None = None
    """The days the question points at, if it names any."""
    terms: list[str] = field(default_factory=list)
    guests: set[MemoryRef] = field(default_factory=set)
    """Candidates that joined as context (a match's neighbour), not as matches."""

    def add(self, found: list[tuple[MemoryRecord, float]]) -> None:
        for record, score in found:
            self.records.setdefault(record.ref, record)
            self.bm25[record.ref] = max(score, self.bm25.get(record.ref, 0.0))


def gather(
    backend: MemoryBackend, query: str, scope: Filters, *, at: datetime, pool: int
) -> Candidates:
    """Candidates for `query` in `scope` asked at `at`: up to about 2×`pool`."""
    ask = when.parse(query, at)
    if ask is None:
        terms = query_terms(query)
    else:  # "What did I do yesterday?": the day is what to look for, not "what" or "do"
        terms = [t for t in query_terms(ask.rest) if t not in STOP_WORDS]
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
    _neighbours(backend, scope, out)
    return out


def refers_back(text: str) -> bool:
    """True if `text` speaks of someone or something said before ("she", "it", "there")."""
    return not _ANAPHORS.isdisjoint(words(text))


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


@runtime_checkable
class TurnOrder(Protocol):
    """A backend that finds the memories written right after one cheaply (by index)."""

    def following(
        self, ref: MemoryRef, filters: Filters | None, n: int, within: float
    ) -> list[MemoryRecord]: ...


def _following(
    backend: MemoryBackend, scope: Filters, sources: list[MemoryRecord]
) -> list[list[MemoryRecord]]:
    """The turns written right after each source, in its scope and `scope`."""
    span = NEIGHBOUR_SPAN.total_seconds()
    if isinstance(backend, TurnOrder):
        return [backend.following(r.ref, scope, NEIGHBOUR_TURNS, span) for r in sources]
    spans = [
        {"created_at": {"$gte": r.created_at, "$lte": r.created_at + NEIGHBOUR_SPAN}}
        for r in sources
    ]
    nearby = backend.query({"$and": [scope, {"$or": spans}]}, order_by="created_at")
    out = []
    for source in sources:
        after = [r for r in nearby if r.scope == source.scope and r.created_at >= source.created_at]
        at = next((i for i, r in enumerate(after) if r.ref == source.ref), len(after))
        out.append(after[at + 1 : at + 1 + NEIGHBOUR_TURNS])
    return out


def _neighbours(backend: MemoryBackend, scope: Filters, out: Candidates) -> None:
    """Give the turns right after the best matches a share of their score."""
    best = sorted(out.bm25.items(), key=lambda kv: -kv[1])[:NEIGHBOUR_SOURCES]
    if not best:
        return
    sources = [out.records[ref] for ref, _ in best]
    share: dict[MemoryRef, float] = {}
    for source, (_, score), after in zip(
        sources, best, _following(backend, scope, sources), strict=True
    ):
        said = _matched(source.content, out.terms)
        for r in after:
            if not refers_back(r.content):
                continue  # a turn that points at nothing before it stands on its own
            # Context lends only the words a turn lacks: a reply repeating the match's
            # words gains nothing, a "she" after "my sister" gains "sister".
            lacking = len(said - _matched(r.content, out.terms)) / max(1, len(said))
            if lacking > 0:
                if r.ref not in out.records:
                    out.records[r.ref] = r
                    out.guests.add(r.ref)
                share[r.ref] = max(share.get(r.ref, 0.0), NEIGHBOUR_SHARE * score * lacking)
    for ref, extra in share.items():
        out.bm25[ref] = out.bm25.get(ref, 0.0) + extra


def _matched(text: str, terms: list[str]) -> set[str]:
    """The query terms `text` says (compared stemmed)."""
    said = {stem(w) for w in words(text)}
    return {t for t in terms if stem(t) in said}
