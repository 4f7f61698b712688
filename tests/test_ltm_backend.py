"""The MemoryBackend contract: both backends, the same tests, the same answers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivemind.errors import StoreError
from hivemind.ltm.analysis import query_terms
from hivemind.ltm.backend import MemoryBackend
from hivemind.ltm.inmemory import InMemoryBackend
from hivemind.ltm.records import MemoryRecord, MemoryStatus, Tier
from hivemind.ltm.sqlite import SQLiteBackend
from hivemind.memory.keys import generate_memory_key

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def rec(id: str, content: str = "", **fields: Any) -> MemoryRecord:
    text = content or f"memory {id}"
    fields.setdefault("created_at", T0)
    fields.setdefault("last_accessed", fields["created_at"])
    return MemoryRecord(id=id, key=generate_memory_key(text), content=text, **fields)


@pytest.fixture(params=["inmemory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryBackend]:
    b: MemoryBackend = (
        InMemoryBackend() if request.param == "inmemory" else SQLiteBackend(tmp_path / "m.db")
    )
    yield b
    b.close()


@pytest.fixture
def filled(backend: MemoryBackend) -> MemoryBackend:
    backend.add_many(
        [
            rec("a", importance=0.9, tags=["db", "sql"], agent="ann", created_at=T0),
            rec("b", importance=0.5, tags=["db"], agent="bob", created_at=T0 + timedelta(hours=1)),
            rec("c", importance=0.2, tags=[], agent=None, created_at=T0 + timedelta(hours=2)),
            rec("d", importance=0.7, tier=Tier.PROJECT, project="apollo", tags=["ops"],
                agent="ann", created_at=T0 + timedelta(hours=3)),
        ]
    )  # fmt: skip
    return backend


def ids(records: list[MemoryRecord]) -> list[str]:
    return sorted(r.id for r in records)


def test_added_record_comes_back_equal(backend: MemoryBackend) -> None:
    r = rec("x", tags=["t"], goal_values={"g/t": 0.75}, source_ids=["s1"])
    backend.add(r)
    assert backend.get("x") == r
    assert backend.get("missing") is None


def test_adding_an_existing_id_replaces_it(backend: MemoryBackend) -> None:
    backend.add(rec("x", "old text"))
    backend.add(rec("x", "new text"))
    assert backend.count() == 1
    got = backend.get("x")
    assert got is not None and got.content == "new text"
    assert [r.id for r, _ in backend.search(["new"])] == ["x"]
    assert backend.search(["old"]) == []


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"importance": {"$eq": 0.5}}, ["b"]),
        ({"importance": {"$ne": 0.5}}, ["a", "c", "d"]),
        ({"importance": {"$gt": 0.5}}, ["a", "d"]),
        ({"importance": {"$gte": 0.7}}, ["a", "d"]),
        ({"importance": {"$lt": 0.5}}, ["c"]),
        ({"importance": {"$lte": 0.5}}, ["b", "c"]),
        ({"importance": {"$gt": 0.3, "$lt": 0.8}}, ["b", "d"]),
        ({"agent": "ann"}, ["a", "d"]),
        ({"agent": None}, ["c"]),
        ({"agent": {"$ne": None}}, ["a", "b", "d"]),
        ({"agent": {"$ne": "ann"}}, ["b", "c"]),
        ({"agent": {"$in": ["bob", None]}}, ["b", "c"]),
        ({"tags": {"$contains": "db"}}, ["a", "b"]),
        ({"tags": {"$in": ["sql", "ops"]}}, ["a", "d"]),
        ({"tags": ["ops"]}, ["d"]),
        ({"tags": {"$in": []}}, []),
        ({"tier": Tier.PROJECT, "project": "apollo"}, ["d"]),
        ({"created_at": {"$gte": T0 + timedelta(hours=2)}}, ["c", "d"]),
        ({"$or": [{"agent": "bob"}, {"importance": {"$lt": 0.3}}]}, ["b", "c"]),
        ({"$and": [{"agent": "ann"}, {"importance": {"$gt": 0.8}}]}, ["a"]),
        ({"status": MemoryStatus.PROPOSED}, []),
        ({}, ["a", "b", "c", "d"]),
    ],
    ids=lambda v: repr(v) if isinstance(v, dict) else None,
)
def test_query_filters(filled: MemoryBackend, filters: dict[str, Any], expected: list[str]) -> None:
    assert ids(filled.query(filters)) == expected
    assert filled.count(filters) == len(expected)


def test_query_orders_and_limits(filled: MemoryBackend) -> None:
    assert [r.id for r in filled.query(order_by="-importance", limit=2)] == ["a", "d"]
    assert [r.id for r in filled.query(order_by=["importance"])] == ["c", "b", "d", "a"]
    assert [r.id for r in filled.query()] == ["d", "c", "b", "a"]  # newest first
    assert [r.id for r in filled.list_all()] == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "filters",
    [{"colour": "red"}, {"importance": {"$regex": "x"}}, {"importance": {"$contains": 1}},
     {"tags": {"$gt": "a"}}, {"$or": []}, {"agent": {"$in": "ann"}}],
    ids=["unknown-field", "unknown-operator", "contains-on-scalar", "compare-list",
         "empty-or", "in-needs-list"],
)  # fmt: skip
def test_bad_filters_are_refused(backend: MemoryBackend, filters: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        backend.query(filters)


def test_delete_and_delete_many_and_clear(filled: MemoryBackend) -> None:
    assert filled.delete("a") is True
    assert filled.delete("a") is False
    assert filled.delete_many(["b", "zzz"]) == 1
    assert filled.clear({"tier": Tier.PROJECT}) == 1
    assert ids(filled.list_all()) == ["c"]
    assert filled.clear() == 1
    assert filled.count() == 0


def test_deleted_memories_leave_the_text_index(filled: MemoryBackend) -> None:
    filled.add(rec("e", "the kubernetes cluster restarted"))
    assert [r.id for r, _ in filled.search(["kubernetes"])] == ["e"]
    filled.delete("e")
    assert filled.search(["kubernetes"]) == []


def test_search_ranks_by_bm25_and_applies_filters(backend: MemoryBackend) -> None:
    backend.add_many(
        [
            rec("1", "postgres postgres replication lag on the primary"),
            rec("2", "we talked about replication in general"),
            rec("3", "lunch was pizza"),
            rec("4", "postgres upgrade", tier=Tier.PROJECT, project="other"),
        ]
    )
    found = backend.search(query_terms("postgres replication"), {"tier": Tier.GLOBAL})
    assert [r.id for r, _ in found] == ["1", "2"]
    assert found[0][1] > found[1][1] > 0


def test_search_matches_word_forms(backend: MemoryBackend) -> None:
    backend.add(rec("1", "the deployments failed twice"))
    assert [r.id for r, _ in backend.search(["deployment"])] == ["1"]


def test_search_finds_tags_domain_and_task_type(backend: MemoryBackend) -> None:
    backend.add(rec("1", "a note", tags=["kubernetes"], domain="infra", task_type="upgrade"))
    for word in ("kubernetes", "infra", "upgrade"):
        assert [r.id for r, _ in backend.search([word])] == ["1"], word


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=80))
def test_hostile_query_text_never_raises(backend: MemoryBackend, text: str) -> None:
    backend.add(rec("1", "quotes \" and AND OR NOT NEAR( col:x * ^ stars"))
    backend.search(query_terms(text))


@pytest.mark.parametrize(
    "query",
    ['"', "'", 'say "hi', "AND", "OR OR", "NOT x", "NEAR(a b)", "col:x", "content:quotes",
     "*", "a*", "^start", "(unbalanced", "x) OR (y", "{x y}", "-x", "+", "\\", "\0", "é à ü",
     "DROP TABLE memories; --", "'); DELETE FROM memories; --"],
)  # fmt: skip
def test_hostile_fts_queries_are_plain_text(filled: MemoryBackend, query: str) -> None:
    filled.add(rec("q", "quotes NEAR and OR content stars"))
    filled.search(query_terms(query))
    assert filled.count() == 5


def test_touch_records_access(filled: MemoryBackend) -> None:
    when = T0 + timedelta(days=3)
    filled.touch(["a", "b", "missing"], when)
    a = filled.get("a")
    assert a is not None and a.last_accessed == when and a.access_count == 1


def test_vectors_are_returned_only_for_their_model(backend: MemoryBackend) -> None:
    backend.add_many(
        [
            rec("1", embedding=[1.0, 0.0], embedding_model="m1"),
            rec("2", embedding=[0.0, 1.0, 0.0], embedding_model="m2"),
            rec("3"),
        ]
    )
    got = backend.vectors("m1")
    assert [(i, list(v)) for i, v in got] == [("1", [1.0, 0.0])]
    assert [i for i, _ in backend.vectors("m2")] == ["2"]
    assert backend.vectors("m3") == []


def test_meta_values_are_kept_and_deleted(backend: MemoryBackend) -> None:
    assert backend.meta_get("k") is None
    backend.meta_set("k", "1")
    backend.meta_set("k", "2")
    assert backend.meta_get("k") == "2"
    backend.meta_set("k", None)
    assert backend.meta_get("k") is None


def test_version_changes_on_every_write(backend: MemoryBackend) -> None:
    before = backend.version()
    backend.add(rec("1"))
    after_add = backend.version()
    backend.delete("1")
    assert len({before, after_add, backend.version()}) == 3


def test_closed_store_refuses_use(backend: MemoryBackend) -> None:
    backend.close()
    with pytest.raises(StoreError):
        backend.add(rec("1"))
