"""A `MemoryBackend` in a dict: for tests and throw-away stores, with a small BM25 index."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

from hivemind.errors import StoreError
from hivemind.ltm.analysis import stem, words
from hivemind.ltm.backend import Filters, check_filters, field_value, matches, order_keys
from hivemind.ltm.records import MemoryRecord, as_utc
from hivemind.ltm.scopes import MemoryRef

# FTS5's bm25() defaults, and the same column weights as the SQLite backend.
K1 = 1.2
B = 0.75
CONTENT_WEIGHT = 1.0
LABEL_WEIGHT = 0.5


def label_text(record: MemoryRecord) -> str:
    """The second indexed column: tags, domain and task type."""
    return " ".join([*record.tags, record.domain or "", record.task_type or ""])


class InMemoryBackend:
    """Everything in process memory; same behaviour as the SQLite backend."""

    def __init__(self) -> None:
        self._records: dict[MemoryRef, MemoryRecord] = {}  # by (scope, id): its identity
        self._meta: dict[str, str] = {}
        # term → {ref: weighted term frequency}; ref → indexed length (tokens)
        self._postings: dict[str, dict[MemoryRef, float]] = defaultdict(dict)
        self._lengths: dict[MemoryRef, int] = {}
        self._terms: dict[MemoryRef, list[str]] = {}
        self._version = 0
        self._closed = False

    # -- writes ----------------------------------------------------------------
    def add(self, record: MemoryRecord) -> None:
        self.add_many([record])

    def add_many(self, records: Iterable[MemoryRecord]) -> int:
        self._check_open()
        n = 0
        for record in records:
            self._unindex(record.ref)
            self._records[record.ref] = record.model_copy(deep=True)
            self._index(record)
            n += 1
        self._version += 1
        return n

    def delete(self, memory_id: str, *, scope: str | None = None) -> bool:
        return self.delete_many([memory_id], scope=scope) >= 1

    def delete_many(self, ids: Iterable[str], *, scope: str | None = None) -> int:
        return self._delete(self._refs(ids, scope))

    def _delete(self, refs: Iterable[MemoryRef]) -> int:
        self._check_open()
        n = 0
        for ref in refs:
            if self._records.pop(ref, None) is not None:
                self._unindex(ref)
                n += 1
        self._version += 1
        return n

    def clear(self, filters: Filters | None = None) -> int:
        check_filters(filters)
        return self._delete([r.ref for r in self._all() if matches(r, filters)])

    def touch(self, ids: Sequence[str], at: datetime, *, scope: str | None = None) -> None:
        self._check_open()
        for ref in self._refs(ids, scope):
            record = self._records[ref]
            record.last_accessed = as_utc(at)
            record.access_count += 1
        self._version += 1

    # -- reads -----------------------------------------------------------------
    def get(self, memory_id: str, *, scope: str | None = None) -> MemoryRecord | None:
        found = self.get_many([memory_id], scope=scope)
        return found[0] if found else None

    def get_many(self, ids: Sequence[str], *, scope: str | None = None) -> list[MemoryRecord]:
        return [self._records[ref].model_copy(deep=True) for ref in self._refs(ids, scope)]

    def query(
        self,
        filters: Filters | None = None,
        *,
        limit: int | None = None,
        order_by: str | Sequence[str] = "-created_at",
    ) -> list[MemoryRecord]:
        check_filters(filters)
        found = [r for r in self._all() if matches(r, filters)]
        for field, descending in reversed(order_keys(order_by)):
            # Stable sorts, last key first; None sorts first, as in SQLite.
            found.sort(key=_sorter(field), reverse=descending)
        return [r.model_copy(deep=True) for r in found[:limit]]

    def list_all(self) -> list[MemoryRecord]:
        return self.query(order_by=["created_at", "id"])

    def count(self, filters: Filters | None = None) -> int:
        check_filters(filters)
        return sum(1 for r in self._all() if matches(r, filters))

    def search(
        self, terms: Sequence[str], filters: Filters | None = None, *, limit: int = 50
    ) -> list[tuple[MemoryRecord, float]]:
        check_filters(filters)
        n_docs = len(self._records)
        if not n_docs or not terms:
            return []
        avg_len = sum(self._lengths.values()) / n_docs or 1.0
        scores: dict[MemoryRef, float] = defaultdict(float)
        for term in {stem(w) for t in terms for w in words(t)}:
            postings = self._postings.get(term, {})
            if not postings:
                continue
            idf = max(1e-6, math.log((n_docs - len(postings) + 0.5) / (len(postings) + 0.5)))
            for ref, tf in postings.items():
                norm = K1 * (1 - B + B * self._lengths[ref] / avg_len)
                scores[ref] += idf * tf * (K1 + 1) / (tf + norm)
        hits = [(self._records[i], s) for i, s in scores.items()]
        ranked = sorted((h for h in hits if matches(h[0], filters)), key=lambda h: -h[1])
        return [(r.model_copy(deep=True), s) for r, s in ranked[:limit]]

    def vectors(self, model: str, filters: Filters | None = None) -> list[tuple[str, Any]]:
        check_filters(filters)
        return [
            (r.id, list(r.embedding))
            for r in self._all()
            if r.embedding is not None and r.embedding_model == model and matches(r, filters)
        ]

    # -- state -----------------------------------------------------------------
    def meta_get(self, key: str) -> str | None:
        return self._meta.get(key)

    def transaction(self) -> AbstractContextManager[None]:
        """Writes here are applied one by one; there is nothing to group."""
        return nullcontext()

    def meta_set(self, key: str, value: str | None) -> None:
        if value is None:
            self._meta.pop(key, None)
        else:
            self._meta[key] = value

    def version(self) -> int:
        return self._version

    def close(self) -> None:
        self._closed = True

    # -- internals -------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the memory store is closed")

    def _refs(self, ids: Iterable[str], scope: str | None) -> list[MemoryRef]:
        """The stored refs with these ids (in `scope`, or in every scope), in id order."""
        self._check_open()
        if scope is not None:
            return [(scope, i) for i in dict.fromkeys(ids) if (scope, i) in self._records]
        by_id: dict[str, list[MemoryRef]] = {}
        for ref in self._records:
            by_id.setdefault(ref[1], []).append(ref)
        return [ref for i in dict.fromkeys(ids) for ref in by_id.get(i, ())]

    def _all(self) -> list[MemoryRecord]:
        self._check_open()
        return list(self._records.values())

    def _index(self, record: MemoryRecord) -> None:
        content = [stem(w) for w in words(record.content)]
        labels = [stem(w) for w in words(label_text(record))]
        tf: dict[str, float] = defaultdict(float)
        for w in content:
            tf[w] += CONTENT_WEIGHT
        for w in labels:
            tf[w] += LABEL_WEIGHT
        for term, weight in tf.items():
            self._postings[term][record.ref] = weight
        self._lengths[record.ref] = len(content) + len(labels)
        self._terms[record.ref] = list(tf)

    def _unindex(self, ref: MemoryRef) -> None:
        if self._lengths.pop(ref, None) is None:
            return
        for term in self._terms.pop(ref):
            postings = self._postings[term]
            postings.pop(ref, None)
            if not postings:
                del self._postings[term]


def _sorter(field: str) -> Callable[[MemoryRecord], tuple[int, Any]]:
    def key(record: MemoryRecord) -> tuple[int, Any]:
        value = field_value(record, field)
        return (0, 0) if value is None else (1, value)

    return key
