"""Filters (`backend.Filters`) as SQL for the SQLite backend; rows addressed in batches."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from hivemind.ltm.backend import LIST_FIELDS, Filters, check_filters, normal_condition, plain

BATCH = 500  # ids per IN (...) list, well under SQLite's variable limit

_SQL_OPS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def to_sql(filters: Filters | None) -> tuple[str, list[Any]]:
    """`filters` as a WHERE clause on the alias `m`, and its parameters."""
    check_filters(filters)
    params: list[Any] = []
    return _conjunction(filters or {}, params), params


def _conjunction(filters: Filters, params: list[Any]) -> str:
    parts: list[str] = []
    for name, cond in filters.items():
        if name in ("$or", "$and"):
            joiner = " OR " if name == "$or" else " AND "
            parts.append("(" + joiner.join(_conjunction(sub, params) for sub in cond) + ")")
            continue
        for op, operand in normal_condition(cond).items():
            parts.append(_condition(name, op, operand, params))
    return " AND ".join(parts) if parts else "1"


def _condition(name: str, op: str, operand: Any, params: list[Any]) -> str:
    col = f"m.{name}"
    if name in LIST_FIELDS:
        values = [operand] if op == "$contains" else list(operand)
        if not values:
            return "0"
        params.extend(plain(v) for v in values)
        return f"EXISTS (SELECT 1 FROM json_each({col}) WHERE value IN ({marks(values)}))"
    if op == "$in":
        values = [plain(v) for v in operand]
        present = [v for v in values if v is not None]
        params.extend(present)
        parts = [f"{col} IN ({marks(present)})"] if present else []
        if len(present) < len(values):
            parts.append(f"{col} IS NULL")
        return "(" + " OR ".join(parts) + ")" if parts else "0"
    value = plain(operand)
    if value is None:
        return {"$eq": f"{col} IS NULL", "$ne": f"{col} IS NOT NULL"}.get(op, "0")
    params.append(value)
    if op == "$ne":
        # A missing value is "not equal" too, as in the in-memory backend.
        return f"({col} IS NULL OR {col} != ?)"
    return f"{col} {_SQL_OPS[op]} ?"


def count_rows(db: sqlite3.Connection, where: str, params: Sequence[Any]) -> int:
    return int(db.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0])


def marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


def chunks(values: list[str]) -> Iterator[list[str]]:
    """`values` in lists of at most `BATCH`."""
    for start in range(0, len(values), BATCH):
        yield values[start : start + BATCH]
