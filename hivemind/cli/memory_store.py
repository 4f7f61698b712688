"""The hive's long-term store as `hivemind memory` commands open it: to write, or to
read only, with a user's mistake underneath (permissions, a folder in the way) as one line."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import Annotated

import typer

from hivemind.cli.common import fail, resolve_hive
from hivemind.errors import HivemindError, UserError
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.ltm.backend import MemoryBackend
from hivemind.ltm.inmemory import InMemoryBackend
from hivemind.ltm.sqlite import SQLiteBackend
from hivemind.ltm.store import LongTermMemory
from hivemind.settings import RetrievalWeights

EmbeddingsOption = Annotated[
    bool,
    typer.Option(
        "--embeddings",
        help="Also rank by sentence embeddings (needs the optional 'embeddings-lite' extra "
        "and the model: see README, Embeddings).",
    ),
]


def checked_project(name: str | None) -> str | None:
    """--project as given; a blank name (which would silently mean global) is refused."""
    if name is not None and not name.strip():
        fail("--project is empty: give a project name, or leave --project out for global")
    return name


def agent_weights(hive: Hive, agent: str) -> RetrievalWeights:
    """The retrieval weights `agent` ranks with: its ROM's over hive.toml's (the last
    good ROM if it is now invalid); UserError if there is no such agent."""
    config = load_hive_config(hive)
    roms = RomRegistry(hive, config.agents, models=config.models)
    roms.tells_problems = False  # `hivemind status` tells what is wrong with a ROM
    return roms.load(agent).retrieval


@contextmanager
def open_store(
    hive: Path | None, embeddings: bool = False, *, write: bool = True
) -> Iterator[tuple[Hive, LongTermMemory]]:
    """The hive's store, closed afterwards; a user mistake anywhere inside is one red line.

    `write=False` (search, export, stats): the store is only read, so a read-only hive
    will do, and a hive that has none gets no empty one made.
    """
    where = resolve_hive(hive)
    try:
        config = load_hive_config(where)
        embedder = None
        if embeddings:
            from hivemind.ltm.embeddings import load_embedder

            embedder = load_embedder()
        with ExitStack() as stack:
            source: Hive | MemoryBackend = where
            if not write:
                source = stack.enter_context(closing(_reading_backend(where)))
            ltm = LongTermMemory(source, config.memory, config.agents.retrieval, embedder)
            with ltm:
                yield where, ltm
    except UserError as exc:
        fail(str(exc))
    except HivemindError as exc:
        # A failure of SQLite or the file system underneath may be the hive's files.
        underneath = write and exc.__cause__ is not None
        problem = _why_unwritable(where.memory_db) if underneath else None
        if problem is not None:  # the person can fix it: permissions, a folder in the way
            fail(problem)
        fail(str(exc), code=2)


def _reading_backend(hive: Hive) -> SQLiteBackend | InMemoryBackend:
    """The store opened only to read; an empty one in memory if the hive has none yet."""
    db = hive.memory_db
    if db.is_dir():
        raise UserError(f"{db}: cannot read the memory store: this is a folder, not a database")
    if not db.exists():
        return InMemoryBackend()
    return SQLiteBackend(db, read_only=True)


def _why_unwritable(db: Path) -> str | None:
    """What keeps the memory store at `db` from being written, if its files tell."""
    if db.is_dir():
        return f"{db}: cannot write the memory store: this is a folder, not a database"
    readers = "; `hivemind memory search`, `export` and `stats` can still read it"
    if db.exists() and not os.access(db, os.W_OK):
        return f"{db}: cannot write the memory store: the file is read-only{readers}"
    folder = db.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{db}: cannot create the memory store: {folder} is a file, not a folder"
    if os.access(folder, os.W_OK):
        return None
    if not db.exists():
        return f"{db}: cannot create the memory store: the folder {folder} is read-only"
    return (f"{db}: cannot write the memory store: its folder is read-only (SQLite writes "
            f"{db.name}-wal and {db.name}-shm beside it){readers}")  # fmt: skip
