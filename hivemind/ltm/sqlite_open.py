"""Opening the SQLite file of a memory store: to write, to read only, or a private upgraded copy."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from hivemind.errors import StoreError
from hivemind.ltm.schema import migrate


def connect(target: str, uri: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode, shared across threads under the backend's lock."""
    return sqlite3.connect(
        target, isolation_level=None, check_same_thread=False, timeout=10.0, uri=uri
    )


def open_for_reading(path: Path) -> sqlite3.Connection:
    """A connection to the existing store at `path`, for reading only.

    The usual connection where the file and its folder can be written: on close it
    checkpoints and removes the -wal and -shm files, which a read-only one leaves
    behind. Else read-only; and immutable where not even the -shm file can be made
    (a read-only folder: nobody can be writing the store through WAL then).
    """
    if not path.is_file():
        why = "a folder is in its place" if path.is_dir() else "nothing has been remembered yet"
        raise StoreError(f"{path}: no memory store here ({why})")
    uri = path.resolve().as_uri()
    writable = os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    for mode in ("rw", "ro") if writable else ("ro",):
        conn = connect(f"{uri}?mode={mode}", uri=True)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the file
            return conn
        except sqlite3.Error:
            conn.close()
    return connect(f"{uri}?mode=ro&immutable=1", uri=True)


def upgraded_copy(source: sqlite3.Connection) -> sqlite3.Connection:
    """A private temporary database (SQLite deletes it on close) holding what `source`
    reads, migrated to the current schema; `source` is closed. A look at a store of an
    older schema reads all of it and writes nothing to the store's file."""
    copy = connect("")
    try:
        source.backup(copy)  # one step: a consistent snapshot, whoever writes meanwhile
        migrate(copy)
    except BaseException:
        copy.close()
        raise
    finally:
        source.close()
    return copy
