"""The storage seam of long-term memory: the `MemoryBackend` protocol and its filters.

Filters are Mongo-style mappings, checked once by `check_filters` so both backends
accept exactly the same language:

    {"tier": "project", "project": "apollo"}            equality (None = missing)
    {"importance": {"$gte": 0.7}, "created_at": {"$lt": when}}
    {"tier": {"$in": ["task", "project"]}, "agent": {"$ne": "bob"}}
    {"tags": {"$contains": "db"}}   {"tags": {"$in": ["db", "sql"]}}   (any of)
    {"$or": [{...}, {...}]}   {"$and": [{...}, {...}]}
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from enum import Enum
from typing import Any, NamedTuple, Protocol, cast, runtime_checkable

from hivemind.ltm.records import MemoryRecord, as_utc

Filters = Mapping[str, Any]

SCALAR_FIELDS: frozenset[str] = frozenset(
    {
        "id", "key", "content", "kind", "tier", "project", "agent", "task_id", "domain",
        "task_type", "importance", "created_at", "last_accessed", "access_count", "status",
        "preference", "embedding_model", "scope", "importance_by",
    }
)  # fmt: skip
LIST_FIELDS: frozenset[str] = frozenset({"tags", "source_ids"})
TIME_FIELDS: frozenset[str] = frozenset({"created_at", "last_accessed"})
ORDER_FIELDS: frozenset[str] = SCALAR_FIELDS - {"content"}

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": operator.eq,
    "$ne": operator.ne,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
OPERATORS: frozenset[str] = frozenset({*COMPARISONS, "$in", "$contains"})


def plain(value: Any) -> Any:
    """A filter operand as stored: enums as their value, datetimes as epoch seconds."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return as_utc(value).timestamp()
    return value


def check_filters(filters: Filters | None) -> None:
    """Raise ValueError naming the culprit if `filters` is not in the filter language."""
    for name, cond in (filters or {}).items():
        if name in ("$or", "$and"):
            if not isinstance(cond, Sequence) or isinstance(cond, str) or not cond:
                raise ValueError(f"{name} needs a non-empty list of filters")
            for sub in cond:
                check_filters(sub)
            continue
        if name not in SCALAR_FIELDS and name not in LIST_FIELDS:
            raise ValueError(f"cannot filter on unknown field {name!r}")
        if not isinstance(cond, Mapping):
            continue
        for op, operand in cond.items():
            if op not in OPERATORS:
                raise ValueError(f"unknown operator {op!r} on {name!r}")
            if op == "$in" and (isinstance(operand, str) or not isinstance(operand, Iterable)):
                raise ValueError(f"$in on {name!r} needs a list")
            if op == "$contains" and name not in LIST_FIELDS:
                raise ValueError(f"$contains works on list fields (tags, source_ids), not {name!r}")
            if op in COMPARISONS and name in LIST_FIELDS:
                raise ValueError(f"{op} does not apply to the list field {name!r}")


def order_keys(order_by: str | Sequence[str]) -> list[tuple[str, bool]]:
    """`"-importance"` or `["importance", "-created_at"]` → [(field, descending), ...]."""
    items = [order_by] if isinstance(order_by, str) else list(order_by)
    keys: list[tuple[str, bool]] = []
    for item in items:
        field = item.lstrip("-")
        if field not in ORDER_FIELDS:
            raise ValueError(f"cannot order by {item!r}")
        keys.append((field, item.startswith("-")))
    return keys


def field_value(record: MemoryRecord, name: str) -> Any:
    return plain(getattr(record, name))


def matches(record: MemoryRecord, filters: Filters | None) -> bool:
    """True if `record` satisfies every condition (a missing value satisfies only `$ne`)."""
    for name, cond in (filters or {}).items():
        if name == "$or":
            if not any(matches(record, sub) for sub in cond):
                return False
            continue
        if name == "$and":
            if not all(matches(record, sub) for sub in cond):
                return False
            continue
        value = field_value(record, name)
        for op, operand in normal_condition(cond).items():
            if not _holds(name, value, op, operand):
                return False
    return True


def normal_condition(cond: Any) -> Mapping[str, Any]:
    """A bare value means `$eq`, a bare list `$in`."""
    if isinstance(cond, Mapping):
        return cond
    return {"$in": cond} if isinstance(cond, list) else {"$eq": cond}


def _holds(name: str, value: Any, op: str, operand: Any) -> bool:
    if name in LIST_FIELDS:
        if op == "$contains":
            return plain(operand) in value
        return any(plain(v) in value for v in operand)  # $in: any of
    if op == "$in":
        return value in {plain(v) for v in operand}
    operand = plain(operand)
    if operand is None:
        if op == "$eq":
            return value is None
        if op == "$ne":
            return value is not None
        return False
    if value is None:
        return op == "$ne"
    return COMPARISONS[op](value, operand)


@runtime_checkable
class MemoryBackend(Protocol):
    """Where memories live. Both implementations pass the same contract tests."""

    def add(self, record: MemoryRecord) -> None:
        """Insert `record`, replacing the record with the same scope and id (its identity)."""

    def add_many(self, records: Iterable[MemoryRecord]) -> int:
        """Insert (or replace) many records in one transaction; returns how many."""

    def get(self, memory_id: str, *, scope: str | None = None) -> MemoryRecord | None:
        """The record with that id (in `scope`, if given), or None."""

    def get_many(self, ids: Sequence[str], *, scope: str | None = None) -> list[MemoryRecord]:
        """The records with those ids, in that order, missing ids skipped: in `scope`, or
        without one in every scope (an id several scopes use gives several records)."""

    def query(
        self,
        filters: Filters | None = None,
        *,
        limit: int | None = None,
        order_by: str | Sequence[str] = "-created_at",
    ) -> list[MemoryRecord]:
        """Records matching `filters`, ordered (`-field` = descending), at most `limit`."""

    def list_all(self) -> list[MemoryRecord]:
        """Every record, oldest first."""

    def count(self, filters: Filters | None = None) -> int:
        """How many records match."""

    def delete(self, memory_id: str, *, scope: str | None = None) -> bool:
        """Delete the record with that id (in `scope`, or in every scope); False if none."""

    def delete_many(self, ids: Iterable[str], *, scope: str | None = None) -> int:
        """Delete the records with these ids (in `scope`, or in every scope); returns
        how many existed."""

    def clear(self, filters: Filters | None = None) -> int:
        """Delete every record matching `filters` (all of them if None); returns how many."""

    def search(
        self, terms: Sequence[str], filters: Filters | None = None, *, limit: int = 50
    ) -> list[tuple[MemoryRecord, float]]:
        """Full-text BM25 over content and tags: records matching any term, best first.

        `terms` are already analysed (see `analysis.query_terms`); scores are
        positive, higher = more relevant.
        """

    def touch(self, ids: Sequence[str], at: datetime, *, scope: str | None = None) -> None:
        """Record an access (in `scope`, or in every scope): `last_accessed = at`,
        `access_count += 1`."""

    def vectors(self, model: str, filters: Filters | None = None) -> list[tuple[str, Any]]:
        """(id, vector) of every matching record embedded by `model` (a float sequence)."""

    def meta_get(self, key: str) -> str | None:
        """A small piece of store state (reflection counters, eligibility traces)."""

    def meta_set(self, key: str, value: str | None) -> None:
        """Set (or with None delete) a piece of store state."""

    def version(self) -> int:
        """A number that changes whenever the stored data changes (caches check it)."""

    def transaction(self) -> AbstractContextManager[None]:
        """Group the writes inside into one transaction where the backend has them
        (SQLite: all or none, one commit); elsewhere they apply one by one."""

    def close(self) -> None:
        """Release the store; it cannot be used afterwards."""


class TaskEndFacts(NamedTuple):
    """What a task end must know to tell whether it has anything to write, all true at
    one instant: whether its meta key (the TD traces) exists, how many memories the task's
    scope holds, how many memories the agent could lose to pruning in one scope."""

    has_meta: bool
    task_memories: int
    agent_memories: int | None
    """Rows of the agent in the scope that `retention.EVICTABLE` matches (None when no
    agent was named)."""


@runtime_checkable
class CountingBackend(Protocol):
    """A backend that keeps the counts a task end and retention need, so asking costs
    (almost) nothing. Optional: the store and retention fall back to queries without it."""

    def evictable_count(self, agent: str, scope: str) -> int:
        """`count({**retention.EVICTABLE, "agent": agent, "scope": scope})`."""

    def task_memory_count(self, task_scope: str) -> int:
        """`count({"tier": "task", "scope": task_scope})`."""

    def task_end_facts(
        self, task_scope: str, meta_key: str, agent: str | None, scope: str
    ) -> TaskEndFacts | None:
        """The facts at one instant (the agent's in `scope`), or None when they cannot be
        had cheaply right now."""


class PruneCandidate(NamedTuple):
    """What retention ranks a memory by."""

    id: str
    importance: float
    created_at: datetime
    last_accessed: datetime


@runtime_checkable
class RankingBackend(Protocol):
    """A backend that hands retention its candidates without building whole records.
    Optional: retention queries records without it."""

    def prune_candidates(self, filters: Filters) -> list[PruneCandidate]:
        """The records `query(filters, order_by="created_at")` would return, in that
        order, as `PruneCandidate`s."""


def counting(backend: object) -> CountingBackend | None:
    """`backend` if it keeps counts (a `CountingBackend`), else None."""
    return cast(CountingBackend, backend) if _has(backend, CountingBackend) else None


def ranking(backend: object) -> RankingBackend | None:
    """`backend` if it lists prune candidates (a `RankingBackend`), else None."""
    return cast(RankingBackend, backend) if _has(backend, RankingBackend) else None


def _has(backend: object, protocol: type) -> bool:
    # Once per class: a protocol check per call would cost more than the shortcut saves.
    key = (type(backend), protocol)
    found = _IMPLEMENTS.get(key)
    if found is None:
        found = _IMPLEMENTS[key] = issubclass(type(backend), protocol)
    return found


_IMPLEMENTS: dict[tuple[type, type], bool] = {}
