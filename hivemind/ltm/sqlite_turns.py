"""The memories written right after one, from SQLite: a chat's next turns.

A mixin of `SQLiteBackend` (kept apart so that the backend's module stays small);
`candidates` asks for it through its `TurnOrder` protocol.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from hivemind.ltm.backend import Filters
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.scopes import MemoryRef
from hivemind.ltm.sqlfilters import to_sql


class TurnQueries:
    """`following` for a backend that gives `_db`, its column list and row reader."""

    _select_sql: str

    def _db(self, write: bool = False) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _to_record(self, row: Sequence[Any]) -> MemoryRecord:
        raise NotImplementedError

    def following(
        self, ref: MemoryRef, filters: Filters | None, n: int, within: float
    ) -> list[MemoryRecord]:
        """The `n` memories of `ref`'s scope written next after it (by time, then by
        insertion: turns imported with one timestamp keep their file order), at most
        `within` seconds later; by the (scope, created_at) index."""
        where, params = to_sql(filters)
        sql = (
            f"SELECT {self._select_sql} FROM memories s JOIN memories m ON m.scope = s.scope "
            f"WHERE s.scope = ? AND s.id = ? AND {where} AND m.created_at >= s.created_at "
            "AND m.created_at <= s.created_at + ? AND (m.created_at > s.created_at OR "
            f"m.rowid > s.rowid) ORDER BY m.created_at, m.rowid LIMIT {int(n)}"
        )
        with self._db() as db:
            rows: Iterator[Sequence[Any]] = db.execute(sql, [*ref, *params, within])
            return [self._to_record(row) for row in rows]
