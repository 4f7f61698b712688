"""The default `MemoryBackend`: one SQLite file (WAL), BM25 from an FTS5 index.

One connection per store, shared across threads under a lock, so the agent loop
can run store calls in worker threads; other processes (the CLI while the daemon
runs) see committed data through WAL and `PRAGMA data_version`.

A memory's identity is its scope plus its id (`UNIQUE (scope, id)`): a write replaces
only the row of its own scope. A few counts and the small `meta` table are kept in
process in a `ledger.Ledger`, so that the common task end, which
writes nothing, asks SQLite one PRAGMA instead of four queries. The ledger follows
this connection's own writes row by row and is emptied as soon as `PRAGMA
data_version` shows that another connection (another process: the CLI, a daemon
worker) committed, or when a transaction of ours rolls back.
"""

from __future__ import annotations

import json
import operator
import sqlite3
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hivemind.errors import StoreError
from hivemind.ltm.analysis import fts_query
from hivemind.ltm.backend import Filters, PruneCandidate, TaskEndFacts, order_keys
from hivemind.ltm.inmemory import CONTENT_WEIGHT, LABEL_WEIGHT, label_text
from hivemind.ltm.ledger import FACT_COLUMNS, Ledger
from hivemind.ltm.records import (
    ImportanceSource,
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    Tier,
    as_utc,
)
from hivemind.ltm.retention import EVICTABLE
from hivemind.ltm.schema import SCHEMA_VERSION, migrate, schema_version
from hivemind.ltm.scopes import by_scope
from hivemind.ltm.sqlfilters import chunks, count_rows, marks, to_sql
from hivemind.ltm.sqlite_open import connect, open_for_reading, upgraded_copy
from hivemind.ltm.sqlite_turns import TurnQueries

_COLUMNS = (
    "id", "key", "content", "kind", "tier", "project", "agent", "task_id", "domain",
    "task_type", "tags", "importance", "created_at", "last_accessed", "access_count",
    "source_ids", "status", "preference", "embedding_model", "embedding", "goal_values",
    "importance_by", "scope", "labels",
)  # fmt: skip
_SELECT = ", ".join(f"m.{c}" for c in _COLUMNS[:-2])
_INSERT = f"INSERT INTO memories ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
_BM25 = f"bm25(memories_fts, {CONTENT_WEIGHT}, {LABEL_WEIGHT})"
_HEAD = 4  # search: matches ranked before filtering, per result wanted
_ALL_FIELDS = set(MemoryRecord.model_fields)
_FACTS_SQL = ", ".join(FACT_COLUMNS)
_row_facts = operator.itemgetter(*(_COLUMNS.index(c) for c in FACT_COLUMNS))
_TASK_TIER = Tier.TASK.value
_META_CACHED_MAX = 10_000  # a larger meta table is read key by key, as before


class SQLiteBackend(TurnQueries):
    """Memories in an SQLite database file (created, or migrated, on open)."""

    _select_sql = _SELECT

    def __init__(self, path: Path | str, *, read_only: bool = False) -> None:
        """`read_only`: never write (`hivemind memory search`, `inspect`); an existing
        store is then opened even where its file or folder cannot be written, and one
        of an older schema is read as it is now, from an upgraded private copy: the
        file keeps its version (an older daemon may be using it) until a writer (the
        daemon on its next start) upgrades it."""
        self.path = Path(path)
        self._lock = threading.RLock()
        self._writes = 0
        self._ledger = Ledger()
        self._seen_version: int | None = None  # data_version when the ledger was last checked
        self._checked_in_transaction = False
        self._meta_too_big = False
        try:
            if read_only:
                self._conn = open_for_reading(self.path)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = connect(str(self.path))
                self._conn.execute("PRAGMA journal_mode = WAL")
            found = schema_version(self._conn)
            if found > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: memory schema version {found} is newer than this "
                    f"hivemind understands ({SCHEMA_VERSION}); upgrade hivemind"
                )
            if read_only and found < SCHEMA_VERSION:
                self._conn = upgraded_copy(self._conn)
            self._conn.execute("PRAGMA synchronous = NORMAL")
            self._conn.execute("PRAGMA temp_store = MEMORY")
            self._conn.execute("PRAGMA cache_size = -65536")  # 64 MiB of pages
            self.migrated_from = found if read_only else migrate(self._conn)
            if read_only:
                self._conn.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: cannot open the memory store: {exc}") from exc
        except OSError as exc:  # its folder could not be made
            raise StoreError(
                f"{exc.filename or self.path.parent}: cannot create the memory store's "
                f"folder: {exc.strerror or exc}"
            ) from exc
        self._closed = False

    # -- plumbing ----------------------------------------------------------------
    @contextmanager
    def _db(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self.path}: the memory store is closed")
            try:
                if not write or self._conn.in_transaction:
                    # A read, or a write inside `transaction()` (held by this thread:
                    # the lock is re-entrant), which commits or rolls back for both.
                    try:
                        yield self._conn
                    except BaseException:
                        if write:  # cut short: the ledger may have heard half of it
                            self._forget_ledger()
                        raise
                    return
                self._conn.execute("BEGIN IMMEDIATE")
                self._checked_in_transaction = False
                try:
                    yield self._conn
                except BaseException:
                    self._forget_ledger()  # it heard of writes that are now undone
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
                self._writes += 1
            except sqlite3.Error as exc:
                self._forget_ledger()
                raise StoreError(f"{self.path}: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the writes inside as one transaction: all or none, one commit."""
        with self._db(write=True):
            yield

    # -- writes ------------------------------------------------------------------
    def add(self, record: MemoryRecord) -> None:
        self.add_many([record])

    def add_many(self, records: Iterable[MemoryRecord]) -> int:
        rows = [_row(r) for r in records]
        if not rows:
            return 0
        with self._db(write=True) as db:
            # Replacing = delete (the trigger unindexes) + insert; new rows are
            # then indexed in one statement, much faster than row by row.
            for scope, ids in by_scope((row[22], row[0]) for row in rows).items():
                self._delete_ids(db, ids, scope)
            top = db.execute("SELECT coalesce(max(rowid), 0) FROM memories").fetchone()[0]
            db.executemany(_INSERT, rows)
            if self._ledger.counting():
                self._ledger.count(map(_row_facts, rows), +1)
            db.execute(
                "INSERT INTO memories_fts (rowid, content, labels) "
                "SELECT rowid, content, labels FROM memories WHERE rowid > ?",
                (top,),
            )
        return len(rows)

    def delete(self, memory_id: str, *, scope: str | None = None) -> bool:
        return self.delete_many([memory_id], scope=scope) >= 1

    def delete_many(self, ids: Iterable[str], *, scope: str | None = None) -> int:
        with self._db(write=True) as db:
            return self._delete_ids(db, list(ids), scope)

    def _delete_ids(self, db: sqlite3.Connection, ids: list[str], scope: str | None) -> int:
        gone = 0
        for chunk in chunks(ids):
            gone += self._delete(db, *_in_scope(chunk, scope))
        return gone

    def clear(self, filters: Filters | None = None) -> int:
        where, params = to_sql(filters)
        with self._db(write=True) as db:
            return self._delete(db, where, params)

    def _delete(self, db: sqlite3.Connection, where: str, params: Sequence[Any]) -> int:
        """DELETE the rows matching `where` (alias `m`); the ledger hears which ones went."""
        delete = f"DELETE FROM memories AS m WHERE {where}"
        if not self._ledger.counting():
            return int(db.execute(delete, params).rowcount)
        # A SELECT first (same transaction, same rows): with the FTS trigger it costs
        # less than DELETE … RETURNING, and works with SQLite before 3.35 too.
        gone = db.execute(f"SELECT {_FACTS_SQL} FROM memories AS m WHERE {where}", params)
        facts = gone.fetchall()
        db.execute(delete, params)
        self._ledger.count(facts, -1)
        return len(facts)

    def touch(self, ids: Sequence[str], at: datetime, *, scope: str | None = None) -> None:
        when = as_utc(at).timestamp()
        with self._db(write=True) as db:
            for chunk in chunks(list(ids)):
                where, params = _in_scope(chunk, scope)
                db.execute(
                    "UPDATE memories AS m SET last_accessed = ?, "
                    f"access_count = access_count + 1 WHERE {where}",
                    [when, *params],
                )

    # -- reads -------------------------------------------------------------------
    def get(self, memory_id: str, *, scope: str | None = None) -> MemoryRecord | None:
        found = self.get_many([memory_id], scope=scope)
        return found[0] if found else None

    def get_many(self, ids: Sequence[str], *, scope: str | None = None) -> list[MemoryRecord]:
        by_id: dict[str, list[MemoryRecord]] = {}
        with self._db() as db:
            for chunk in chunks(list(dict.fromkeys(ids))):
                where, params = _in_scope(chunk, scope)
                sql = f"SELECT {_SELECT} FROM memories m WHERE {where} ORDER BY m.rowid"
                for row in db.execute(sql, params):
                    by_id.setdefault(row[0], []).append(_record(row))
        return [r for i in ids for r in by_id.get(i, ())]

    def query(
        self,
        filters: Filters | None = None,
        *,
        limit: int | None = None,
        order_by: str | Sequence[str] = "-created_at",
    ) -> list[MemoryRecord]:
        where, params = to_sql(filters)
        order = ", ".join(f"m.{f} {'DESC' if d else 'ASC'}" for f, d in order_keys(order_by))
        sql = f"SELECT {_SELECT} FROM memories m WHERE {where} ORDER BY {order}, m.rowid"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._db() as db:
            return [_record(row) for row in db.execute(sql, params)]

    def prune_candidates(self, filters: Filters) -> list[PruneCandidate]:
        """What retention ranks by, as `query(filters, order_by="created_at")` orders it;
        four columns instead of whole records (about ten times faster)."""
        where, params = to_sql(filters)
        sql = (
            "SELECT m.id, m.importance, m.created_at, m.last_accessed FROM memories m "
            f"WHERE {where} ORDER BY m.created_at ASC, m.rowid"
        )
        when = datetime.fromtimestamp  # as `_record` reads times: the very same values
        with self._db() as db:
            return [
                PruneCandidate(i, imp, when(created, UTC), when(accessed, UTC))
                for i, imp, created, accessed in db.execute(sql, params)
            ]

    def list_all(self) -> list[MemoryRecord]:
        return self.query(order_by=["created_at", "id"])

    def count(self, filters: Filters | None = None) -> int:
        where, params = to_sql(filters)
        with self._db() as db:
            if where == "1":  # every row: eviction asks at every write
                ledger = self._ledger_now(db)
                if ledger.total is None:
                    ledger.total = count_rows(db, where, params)
                return ledger.total
            return count_rows(db, where, params)

    def evictable_count(self, agent: str, scope: str) -> int:
        """How many of `agent`'s memories in `scope` retention may prune."""
        with self._db() as db:
            return self._agent_rows(db, self._ledger_now(db), agent, scope)

    def task_memory_count(self, task_scope: str) -> int:
        """How many memories the task scope `task_scope` holds."""
        with self._db() as db:
            return self._task_rows(db, self._ledger_now(db)).get(task_scope, 0)

    def task_end_facts(
        self, task_scope: str, meta_key: str, agent: str | None, scope: str
    ) -> TaskEndFacts | None:
        """The facts a task end decides on, from the ledger (one PRAGMA when it knows
        them); None if it had to ask SQLite and another connection committed meanwhile,
        since the answers might then not hold at one instant."""
        with self._lock:  # held throughout: the ledger seen here is the one loaded below
            ledger = self._checked_ledger()
            known = ledger.task_end_facts(task_scope, meta_key, agent, scope)
            if known is not None:
                return known  # the common case: one PRAGMA, no query
            return self._load_task_end_facts(ledger, task_scope, meta_key, agent, scope)

    def _load_task_end_facts(
        self, ledger: Ledger, task_scope: str, meta_key: str, agent: str | None, scope: str
    ) -> TaskEndFacts | None:
        """The facts with the ledger's gaps read from SQLite: trusted only if no other
        connection committed meanwhile (the answers would not hold at one instant)."""
        with self._db() as db:
            facts = TaskEndFacts(
                has_meta=self._meta_value(db, ledger, meta_key) is not None,
                task_memories=self._task_rows(db, ledger).get(task_scope, 0),
                agent_memories=(
                    None if agent is None else self._agent_rows(db, ledger, agent, scope)
                ),
            )
            return None if self._ledger_now(db) is not ledger else facts

    def search(
        self, terms: Sequence[str], filters: Filters | None = None, *, limit: int = 50
    ) -> list[tuple[MemoryRecord, float]]:
        if not terms:
            return []
        where, params = to_sql(filters)
        match = fts_query(list(terms))
        # Fast path: filter the best `_HEAD × limit` matches. If fewer than `limit`
        # survive the filter (a small project in a big store), rank every match in
        # scope; both paths apply the same filter, so scope is never widened.
        head = (
            f"SELECT {_SELECT}, -f.score FROM (SELECT rowid, {_BM25} AS score FROM "
            f"memories_fts WHERE memories_fts MATCH ? ORDER BY score LIMIT {_HEAD * int(limit)}) "
            f"AS f JOIN memories m ON m.rowid = f.rowid WHERE {where} "
            f"ORDER BY f.score LIMIT {int(limit)}"
        )
        full = (
            f"SELECT {_SELECT}, -{_BM25} FROM memories_fts JOIN memories m "
            f"ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ? AND {where} "
            f"ORDER BY {_BM25} LIMIT {int(limit)}"
        )
        with self._db() as db:
            rows = db.execute(head, [match, *params]).fetchall()
            if len(rows) < limit:
                rows = db.execute(full, [match, *params]).fetchall()
        return [(_record(row[:-1]), float(row[-1])) for row in rows]

    def vectors(self, model: str, filters: Filters | None = None) -> list[tuple[str, Any]]:
        where, params = to_sql(filters)
        sql = (
            f"SELECT m.id, m.embedding FROM memories m "
            f"WHERE m.embedding_model = ? AND m.embedding IS NOT NULL AND {where}"
        )
        with self._db() as db:
            return [(i, array("f", blob)) for i, blob in db.execute(sql, [model, *params])]

    # -- state -------------------------------------------------------------------
    def meta_get(self, key: str) -> str | None:
        with self._db() as db:
            return self._meta_value(db, self._ledger_now(db), key)

    def meta_set(self, key: str, value: str | None) -> None:
        with self._db(write=True) as db:
            if value is None:
                db.execute("DELETE FROM meta WHERE key = ?", (key,))
            else:
                db.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )
            meta = self._ledger.meta
            if meta is not None:
                if value is None:
                    meta.pop(key, None)
                else:
                    meta[key] = value

    def version(self) -> int:
        with self._db() as db:
            # data_version moves on other connections' commits, _writes on ours.
            other = int(db.execute("PRAGMA data_version").fetchone()[0])
        return (self._writes << 32) | other

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def _to_record(self, row: Sequence[Any]) -> MemoryRecord:
        return _record(row)

    # -- the ledger ------------------------------------------------------------------
    def _checked_ledger(self) -> Ledger:
        """`_ledger_now` without `_db` (whose generator costs more than the PRAGMA's
        Python side on the hot path); the caller holds the lock."""
        if self._closed:
            raise StoreError(f"{self.path}: the memory store is closed")
        try:
            return self._ledger_now(self._conn)
        except sqlite3.Error as exc:
            self._forget_ledger()
            raise StoreError(f"{self.path}: {exc}") from exc

    def _ledger_now(self, db: sqlite3.Connection) -> Ledger:
        """The ledger, emptied first if another connection committed since the last look.

        One `PRAGMA data_version`; none again inside our own write transaction once
        looked, since nobody else can commit while we hold the write lock.
        """
        if not (self._checked_in_transaction and db.in_transaction):
            version = int(db.execute("PRAGMA data_version").fetchone()[0])
            if version != self._seen_version:
                self._forget_ledger()
                self._seen_version = version
            self._checked_in_transaction = db.in_transaction
        return self._ledger

    def _forget_ledger(self) -> None:
        """Start an empty ledger (a new object: `task_end_facts` tells by identity)."""
        self._ledger = Ledger()

    def _agent_rows(
        self, db: sqlite3.Connection, ledger: Ledger, agent: str, scope: str
    ) -> int:
        known = ledger.agents.get((scope, agent))
        if known is None:
            where, params = to_sql({**EVICTABLE, "agent": agent, "scope": scope})
            known = ledger.agents[(scope, agent)] = count_rows(db, where, params)
        return known

    def _task_rows(self, db: sqlite3.Connection, ledger: Ledger) -> dict[str, int]:
        if ledger.tasks is None:
            ledger.tasks = dict(
                db.execute(
                    "SELECT scope, count(*) FROM memories WHERE tier = ? GROUP BY scope",
                    (_TASK_TIER,),
                )
            )
        return ledger.tasks

    def _meta_value(self, db: sqlite3.Connection, ledger: Ledger, key: str) -> str | None:
        """A meta value: from the ledger's copy of the table, or read by key.

        A fresh ledger reads by key; asked again (so no other connection committed in
        between: in a busy hive of several processes the ledger seldom lives that long)
        it reads the whole table, and from then on answers every key, absent ones too.
        """
        if ledger.meta is None and ledger.meta_asked and not self._meta_too_big:
            rows = db.execute(f"SELECT key, value FROM meta LIMIT {_META_CACHED_MAX + 1}")
            meta = {str(k): str(v) for k, v in rows}
            # Too big once, too big for good: it would cost more than it saves.
            self._meta_too_big = len(meta) > _META_CACHED_MAX
            ledger.meta = None if self._meta_too_big else meta
        if ledger.meta is not None:
            return ledger.meta.get(key)
        ledger.meta_asked = True
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])


# -- rows <-> records ----------------------------------------------------------
def _json(value: list[str] | dict[str, float]) -> str:
    return json.dumps(value) if value else ("[]" if isinstance(value, list) else "{}")


def _row(r: MemoryRecord) -> tuple[Any, ...]:
    vector = array("f", r.embedding).tobytes() if r.embedding is not None else None
    return (
        r.id, r.key, r.content, r.kind.value, r.tier.value, r.project, r.agent, r.task_id,
        r.domain, r.task_type, _json(r.tags), r.importance, r.created_at.timestamp(),
        r.last_accessed.timestamp(), r.access_count, _json(r.source_ids),
        r.status.value, int(r.preference), r.embedding_model, vector,
        _json(r.goal_values), r.importance_by, r.scope, label_text(r).strip(),
    )  # fmt: skip


def _record(row: Sequence[Any]) -> MemoryRecord:
    # Rows were validated on the way in; constructing skips a second validation.
    vector = row[19]
    return MemoryRecord.model_construct(
        _fields_set=_ALL_FIELDS, id=row[0], key=row[1], content=row[2],
        kind=MemoryKind(row[3]), tier=Tier(row[4]),
        project=row[5], agent=row[6], task_id=row[7], domain=row[8], task_type=row[9],
        tags=json.loads(row[10]), importance=row[11],
        created_at=datetime.fromtimestamp(row[12], UTC),
        last_accessed=datetime.fromtimestamp(row[13], UTC), access_count=row[14],
        source_ids=json.loads(row[15]), status=MemoryStatus(row[16]),
        preference=bool(row[17]), embedding_model=row[18],
        embedding=list(array("f", vector)) if vector is not None else None,
        goal_values=json.loads(row[20]),
        importance_by=None if row[21] is None else ImportanceSource(row[21]),
    )  # fmt: skip


def _in_scope(ids: Sequence[str], scope: str | None) -> tuple[str, list[Any]]:
    """A WHERE clause (alias `m`) for these ids, in `scope` or (None) in every scope."""
    if scope is None:
        return f"m.id IN ({marks(ids)})", list(ids)
    return f"m.scope = ? AND m.id IN ({marks(ids)})", [scope, *ids]
