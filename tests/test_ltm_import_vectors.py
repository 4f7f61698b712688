"""`LongTermMemory.import_jsonl` updates by id on real SQLite: a memory's vector follows
its text, and `forget` deletes by id."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from hivemind.ltm.store import LongTermMemory


class LengthEmbedder:
    """A fake at the embedding seam: a text's vector is its length and word count."""

    name = "length-v1"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [[float(len(t)), float(len(t.split()))] for t in texts]


def line(**fields: object) -> str:
    return json.dumps(fields)


def stored_with_a_vector(tmp_path: Path) -> Path:
    """A store holding memory v1, imported with an embedder (so it has a vector)."""
    db = tmp_path / "memory.db"
    with LongTermMemory(db, embedder=LengthEmbedder()) as ltm:
        ltm.import_jsonl([line(id="v1", content="pad 39A is booked")])
    return db


def test_an_update_without_an_embedder_keeps_the_vector_of_the_same_text(
    tmp_path: Path,
) -> None:
    db = stored_with_a_vector(tmp_path)
    with LongTermMemory(db) as ltm:
        report = ltm.import_jsonl([line(id="v1", content="pad 39A is booked", importance=0.9)])
        record = ltm.backend.get("v1")
    assert report.updated == 1
    assert record is not None and record.embedding_model == "length-v1"
    assert record.embedding == [17.0, 4.0]


def test_an_update_of_the_text_without_an_embedder_drops_the_stale_vector(
    tmp_path: Path,
) -> None:
    db = stored_with_a_vector(tmp_path)
    with LongTermMemory(db) as ltm:
        ltm.import_jsonl([line(id="v1", content="pad 39B is booked for July")])
        record = ltm.backend.get("v1")
    assert record is not None and record.embedding is None and record.embedding_model is None


def test_reimporting_with_an_embedder_counts_the_same_text_as_unchanged(tmp_path: Path) -> None:
    with LongTermMemory(tmp_path / "memory.db", embedder=LengthEmbedder()) as ltm:
        ltm.import_jsonl([line(id="v1", content="pad 39A is booked")])
        report = ltm.import_jsonl([line(id="v1", content="pad 39A is booked")])
    assert (report.imported, report.updated, report.unchanged, report.new) == (1, 0, 1, 0)


def test_a_line_invalid_only_against_the_stored_memory_is_a_bad_line(tmp_path: Path) -> None:
    with LongTermMemory(tmp_path / "memory.db") as ltm:
        ltm.import_jsonl([line(id="t1", content="global note")])
        report = ltm.import_jsonl([line(id="t1", content="global note", tier="project")])
        record = ltm.backend.get("t1")
    assert report.errors == ["line 1: a project memory needs `project`"]
    assert report.imported == 0 and record is not None and record.tier.value == "global"


def test_forget_returns_what_it_deleted_and_what_was_unknown(tmp_path: Path) -> None:
    with LongTermMemory(tmp_path / "memory.db") as ltm:
        ltm.import_jsonl([line(id="a", content="one"), line(id="b", content="two")])
        assert ltm.forget(["a", "zz", "a"]) == (["a"], ["zz"])
        assert [r.id for r in ltm.backend.list_all()] == ["b"]
