"""The SQLite schema of `.hivemind/memory.db`, as numbered migrations.

`PRAGMA user_version` holds the schema version; opening a store applies the
missing migrations in order inside one transaction, so a fresh database and an
old one end up with the same schema. Never edit a released migration: add one.
"""

from __future__ import annotations

import sqlite3

from hivemind.ltm.scopes import scope_key

# v1: records and an FTS5 index of their text, kept in sync by triggers.
_V1 = """
CREATE TABLE memories (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    key TEXT NOT NULL,
    content TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'episodic',
    tier TEXT NOT NULL DEFAULT 'global',
    project TEXT,
    agent TEXT,
    task_id TEXT,
    domain TEXT,
    task_type TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    importance REAL NOT NULL DEFAULT 0.5,
    created_at REAL NOT NULL,
    last_accessed REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    source_ids TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX memories_scope ON memories (tier, project, task_id);
CREATE INDEX memories_key ON memories (key);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, content='memories', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, content) VALUES (new.rowid, new.content);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content)
    VALUES ('delete', old.rowid, old.content);
END;
"""

# v2: proposals awaiting approval, embeddings (model name + float32 vector),
# learned per-goal values; an index for per-agent retention.
_V2 = """
ALTER TABLE memories ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
ALTER TABLE memories ADD COLUMN preference INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN embedding_model TEXT;
ALTER TABLE memories ADD COLUMN embedding BLOB;
ALTER TABLE memories ADD COLUMN goal_values TEXT NOT NULL DEFAULT '{}';
CREATE INDEX memories_agent ON memories (agent, importance);
"""

# v3: tags, domain and task type are searchable (a second, lighter FTS column);
# new rows are indexed in bulk by the backend (imports run ~2x faster than with
# a per-row trigger); deletes and text edits still go through triggers.
_V3 = """
DROP TRIGGER memories_ai;
DROP TRIGGER memories_ad;
DROP TABLE memories_fts;
ALTER TABLE memories ADD COLUMN labels TEXT NOT NULL DEFAULT '';
UPDATE memories SET labels = trim(
    coalesce((SELECT group_concat(value, ' ') FROM json_each(memories.tags)), '')
    || ' ' || coalesce(domain, '') || ' ' || coalesce(task_type, '')
);
CREATE VIRTUAL TABLE memories_fts USING fts5 (
    content, labels, content='memories', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO memories_fts (memories_fts) VALUES ('rebuild');
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, labels)
    VALUES ('delete', old.rowid, old.content, old.labels);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF content, labels ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, labels)
    VALUES ('delete', old.rowid, old.content, old.labels);
    INSERT INTO memories_fts (rowid, content, labels) VALUES (new.rowid, new.content, new.labels);
END;
"""

# v4: a memory's identity is its scope plus its id (two projects may both hold a
# `D1:1`): `id` is no longer UNIQUE store-wide, (scope, id) is. SQLite cannot drop a
# constraint, so the table is rebuilt, every row kept with its rowid (the FTS index
# keys on it) and indexed again, labels too; `hivemind_scope` is `scopes.scope_key`,
# registered by `migrate`.
_V4 = """
DROP TRIGGER memories_ad;
DROP TRIGGER memories_au;
CREATE TABLE memories_v4 (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    key TEXT NOT NULL,
    content TEXT NOT NULL,
    kind TEXT NOT NULL DEFAULT 'episodic',
    tier TEXT NOT NULL DEFAULT 'global',
    project TEXT,
    agent TEXT,
    task_id TEXT,
    domain TEXT,
    task_type TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    importance REAL NOT NULL DEFAULT 0.5,
    created_at REAL NOT NULL,
    last_accessed REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    source_ids TEXT NOT NULL DEFAULT '[]',
    status TEXT NOT NULL DEFAULT 'active',
    preference INTEGER NOT NULL DEFAULT 0,
    embedding_model TEXT,
    embedding BLOB,
    goal_values TEXT NOT NULL DEFAULT '{}',
    labels TEXT NOT NULL DEFAULT '',
    scope TEXT NOT NULL
);
INSERT INTO memories_v4 SELECT rowid, id, key, content, kind, tier, project, agent, task_id,
    domain, task_type, tags, importance, created_at, last_accessed, access_count, source_ids,
    status, preference, embedding_model, embedding, goal_values,
    trim(coalesce((SELECT group_concat(value, ' ') FROM json_each(memories.tags)), '')
        || ' ' || coalesce(domain, '') || ' ' || coalesce(task_type, '')),
    hivemind_scope(tier, project, CASE WHEN tier = 'task' THEN task_id END)
    FROM memories;
DROP TABLE memories;
ALTER TABLE memories_v4 RENAME TO memories;
CREATE UNIQUE INDEX memories_identity ON memories (scope, id);
CREATE INDEX memories_id ON memories (id);
CREATE INDEX memories_scope ON memories (tier, project, task_id);
CREATE INDEX memories_key ON memories (key);
CREATE INDEX memories_agent ON memories (agent, importance);
INSERT INTO memories_fts (memories_fts) VALUES ('rebuild');
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, labels)
    VALUES ('delete', old.rowid, old.content, old.labels);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF content, labels ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, content, labels)
    VALUES ('delete', old.rowid, old.content, old.labels);
    INSERT INTO memories_fts (rowid, content, labels) VALUES (new.rowid, new.content, new.labels);
END;
"""

# v5: `recall(domain=, task_type=)` and `memory search --domain --task-type` filter
# through an index, not a scan of the store.
_V5 = """
CREATE INDEX memories_goal ON memories (domain, task_type);
"""

# v6: memories of a scope by time, for the turns next to a match and the days a
# question names (`hivemind.ltm.candidates`); every row stays as it is.
_V6 = """
CREATE INDEX memories_time ON memories (scope, created_at);
"""

# v7: how each memory's importance was set (NULL: before this was kept); the
# agent's model rates its heuristic ones, oldest first (`hivemind.ltm.rating`).
_V7 = """
ALTER TABLE memories ADD COLUMN importance_by TEXT;
CREATE INDEX memories_unrated ON memories (agent, created_at) WHERE importance_by = 'heuristic';
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7)
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply the migrations after the current version up to `target`; returns the old version.

    `conn` must be in autocommit mode (isolation_level=None): the whole upgrade is
    one explicit transaction, so a failure leaves the old schema untouched.
    """
    current = schema_version(conn)
    if current >= target:
        return current
    conn.create_function("hivemind_scope", 3, scope_key, deterministic=True)
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated while we waited for the write lock.
        current = schema_version(conn)
        for version in range(current + 1, target + 1):
            for statement in _statements(MIGRATIONS[version - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return current


def _statements(script: str) -> list[str]:
    """Split a migration into statements (triggers contain `;` inside BEGIN…END)."""
    out: list[str] = []
    buf = ""
    for line in script.strip().splitlines():
        buf += line + "\n"
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
