"""The SQLite backend's own promises: WAL, schema versions and migrations, shared files."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hivemind.errors import StoreError
from hivemind.ltm.schema import SCHEMA_VERSION, migrate
from hivemind.ltm.sqlite import SQLiteBackend
from hivemind.memory.keys import generate_memory_key
from tests.test_ltm_backend import rec


def old_database(path: Path, version: int) -> None:
    """A database as an older hivemind left it, with one memory in it."""
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=version)
    when = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
    # From v4 a row has its scope, and the backend labels and indexes new rows itself.
    column, value = (", scope, labels", ", 'global', 'infra'") if version >= 4 else ("", "")
    conn.execute(
        "INSERT INTO memories (id, key, content, tier, tags, importance, created_at, "
        f"last_accessed{column}) VALUES (?, ?, ?, 'global', ?, 0.8, ?, ?{value})",
        ("old-1", generate_memory_key("the build cache lives on S3"),
         "the build cache lives on S3", json.dumps(["infra"]), when, when),
    )  # fmt: skip
    if version >= 4:
        conn.execute("INSERT INTO memories_fts (rowid, content, labels) "
                     "SELECT rowid, content, labels FROM memories")
    conn.close()


def test_a_new_store_uses_wal_and_the_current_schema(tmp_path: Path) -> None:
    store = SQLiteBackend(tmp_path / "m.db")
    store.close()
    conn = sqlite3.connect(tmp_path / "m.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION), ids=lambda v: f"from-v{v}")
def test_an_older_schema_is_migrated_with_its_data(tmp_path: Path, version: int) -> None:
    old_database(tmp_path / "m.db", version)
    store = SQLiteBackend(tmp_path / "m.db")
    assert store.migrated_from == version
    old = store.get("old-1")
    assert old is not None and old.content == "the build cache lives on S3"
    assert old.tags == ["infra"] and old.status.value == "active" and old.goal_values == {}
    assert [r.id for r, _ in store.search(["cache"])] == ["old-1"]
    assert [r.id for r, _ in store.search(["infra"])] == ["old-1"]  # tags searchable since v3
    store.add(rec("new-1", "another cache note"))
    assert {r.id for r, _ in store.search(["cache"])} == {"old-1", "new-1"}
    store.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "m.db")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this hivemind"):
        SQLiteBackend(tmp_path / "m.db")


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "m.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match=r"m\.db"):
        SQLiteBackend(tmp_path / "m.db")


def test_two_stores_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    a = SQLiteBackend(tmp_path / "m.db")
    b = SQLiteBackend(tmp_path / "m.db")
    seen = b.version()
    a.add(rec("1", "written by the daemon"))
    assert b.version() != seen
    assert [r.id for r, _ in b.search(["daemon"])] == ["1"]
    a.close()
    b.close()


def test_editing_text_in_place_keeps_the_index_in_sync(tmp_path: Path) -> None:
    store = SQLiteBackend(tmp_path / "m.db")
    store.add(rec("1", "original words"))
    store.close()
    conn = sqlite3.connect(tmp_path / "m.db")
    conn.execute("UPDATE memories SET content = 'edited words' WHERE id = '1'")
    conn.commit()
    conn.close()
    store = SQLiteBackend(tmp_path / "m.db")
    assert store.search(["original"]) == []
    assert [r.id for r, _ in store.search(["edited"])] == ["1"]
    store.close()


def test_a_transaction_commits_its_writes_once_or_not_at_all(tmp_path: Path) -> None:
    store = SQLiteBackend(tmp_path / "m.db")
    before = store.version()
    with store.transaction():
        store.add(rec("a", "first"))
        store.meta_set("k", "v")
        store.add(rec("b", "second"))
    assert store.count({}) == 2 and store.meta_get("k") == "v"
    assert store.version() == before + (1 << 32)  # one commit for the three writes

    with pytest.raises(RuntimeError), store.transaction():
        store.add(rec("c", "third"))
        raise RuntimeError("crash inside")
    assert store.get("c") is None and store.count({}) == 2
    store.close()


@pytest.mark.parametrize("wal", [False, True], ids=["rollback-journal", "wal"])
@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION), ids=lambda v: f"v{v}")
def test_reading_an_older_schema_reads_it_all_and_leaves_the_file_as_it_was(
    tmp_path: Path, version: int, wal: bool
) -> None:
    """A read-only open migrated the file: a look from a newer hivemind upgraded the
    store under an older daemon, which then refused it as too new."""
    db = tmp_path / "m.db"
    old_database(db, version)
    if wal:
        sqlite3.connect(db).execute("PRAGMA journal_mode = WAL").connection.close()
    data, files = db.read_bytes(), sorted(p.name for p in tmp_path.iterdir())

    store = SQLiteBackend(db, read_only=True)
    assert store.migrated_from == version
    old = store.get("old-1")
    assert old is not None and old.tags == ["infra"] and old.status.value == "active"
    assert [r.id for r, _ in store.search(["infra"])] == ["old-1"]
    with pytest.raises(StoreError):
        store.add(rec("new-1", "never written"))
    store.close()

    assert db.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == version
    conn.close()


def test_a_read_only_open_of_the_current_schema_cannot_write(tmp_path: Path) -> None:
    SQLiteBackend(tmp_path / "m.db").close()
    store = SQLiteBackend(tmp_path / "m.db", read_only=True)
    with pytest.raises(StoreError):
        store.add(rec("new-1", "never written"))
    assert store.count({}) == 0
    store.close()
