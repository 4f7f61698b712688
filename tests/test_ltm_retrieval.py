"""Ranking: normalised terms, recency with `at`, the relevance gate, optional embeddings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from hivemind.ltm.analysis import query_terms
from hivemind.ltm.inmemory import InMemoryBackend
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.retrieval import RetrievalTuning, Retriever, minmax, recency
from hivemind.ltm.store import LongTermMemory
from hivemind.settings import RetrievalWeights
from tests.test_ltm_backend import rec

NOW = datetime(2024, 6, 1, tzinfo=UTC)
EVERYTHING = {"status": "active"}

CONCEPTS = [
    {"dog", "puppy", "pup", "canine", "hound"},
    {"car", "vehicle", "automobile", "sedan"},
    {"doctor", "physician", "clinic", "appointment"},
    {"pizza", "lunch", "food", "dinner"},
]


class ConceptEmbedder:
    """A tiny deterministic embedder: one dimension per concept (synonyms share it)."""

    def __init__(self, name: str = "concepts-v1") -> None:
        self.name = name
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        out = []
        for text in texts:
            words = set(query_terms(text)) | set(text.lower().split())
            out.append([1.0 if words & c else 0.0 for c in CONCEPTS] + [0.1])
        return out


def ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)


def retriever(*records: MemoryRecord, **tuning: float) -> Retriever:
    backend = InMemoryBackend()
    backend.add_many(records)
    return Retriever(backend, RetrievalWeights(), RetrievalTuning(**tuning))  # type: ignore[arg-type]


def test_minmax_spans_zero_to_one_and_handles_ties() -> None:
    assert minmax([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert minmax([5.0, 5.0]) == [1.0, 1.0]
    assert minmax([0.0, 0.0]) == [0.0, 0.0]
    assert minmax([]) == []


def test_every_term_is_normalised_over_the_candidates() -> None:
    r = retriever(
        rec("1", "backup of the database failed", importance=0.9, created_at=ago(500)),
        rec("2", "database backup done, backup verified", importance=0.3, created_at=ago(1)),
        rec("3", "the database is slow", importance=0.6, created_at=ago(50)),
    )
    found = r.retrieve("database backup", EVERYTHING, k=10, at=NOW)
    assert len(found) == 3
    for term in ("recency", "importance"):
        values = [getattr(m, term) for m in found]
        assert min(values) == 0.0 and max(values) == 1.0, term
    # Relevance is a share of the best match's: the weakest match is not zeroed.
    relevance = {m.id: m.relevance for m in found}
    assert relevance["2"] == 1.0 and 0.0 < relevance["3"] < relevance["1"] < 1.0
    assert relevance["1"] == pytest.approx(found[1].bm25 / found[0].bm25)
    for m in found:
        assert 0.0 <= m.score <= 1.0
        assert m.terms()["id"] == m.id


def test_recency_decays_with_hours_since_last_access() -> None:
    r = rec("1", created_at=ago(24 * 7))
    assert recency(r, NOW, half_life_hours=24 * 7) == pytest.approx(0.5)
    assert recency(r, NOW + timedelta(days=7), half_life_hours=24 * 7) == pytest.approx(0.25)
    # An access after `at` does not count: "now" is `at`.
    touched = rec("2", created_at=ago(48), last_accessed=NOW + timedelta(days=1))
    assert recency(touched, NOW, half_life_hours=48) == pytest.approx(0.5)
    # A memory from after `at` is as far from "now" as one from before.
    later = rec("3", created_at=NOW + timedelta(hours=48))
    assert recency(later, NOW, half_life_hours=48) == pytest.approx(0.5)


def test_at_decides_which_of_two_equal_matches_is_recent() -> None:
    r = retriever(
        rec("jan", "standup moved to ten", created_at=datetime(2024, 1, 1, tzinfo=UTC)),
        rec("may", "standup moved to nine", created_at=datetime(2024, 5, 1, tzinfo=UTC)),
    )
    found = r.retrieve("standup moved", EVERYTHING, k=2, at=datetime(2024, 5, 2, tzinfo=UTC))
    assert [m.id for m in found] == ["may", "jan"]
    assert found[0].recency == 1.0 and found[1].recency == 0.0


def test_the_newer_of_two_close_matches_wins_however_few_candidates() -> None:
    """Two statements of a fact whose BM25 differs a little (a word more in one): with
    min-max relevance the weaker got 0, and the gate took its recency away, so the stale
    one won."""
    r = retriever(
        rec("old", "The staging server address is 10.0.0.5", created_at=ago(24 * 400)),
        rec("new", "The staging server address is now 10.0.0.9", created_at=ago(24)),
    )
    found = r.retrieve("staging server address", EVERYTHING, k=2, at=NOW)
    assert [m.id for m in found] == ["new", "old"]
    assert all(m.relevance > 0.8 for m in found)


def test_newer_statement_of_a_fact_wins_a_relevance_tie() -> None:
    r = retriever(
        rec("old", "my gym membership is at Iron Temple", created_at=ago(24 * 90)),
        rec("new", "my gym membership is at Crunch now", created_at=ago(24 * 3)),
    )
    assert r.retrieve("gym membership", EVERYTHING, k=1, at=NOW)[0].id == "new"


def test_recency_and_importance_cannot_bury_a_clearly_relevant_memory() -> None:
    answer = rec(
        "answer", "the staging database password rotates every ninety days",
        importance=0.1, created_at=ago(24 * 300),
    )  # fmt: skip
    noise = [
        rec(f"n{i}", f"staging deploy {i} went fine", importance=1.0, created_at=ago(i))
        for i in range(20)
    ]
    found = retriever(answer, *noise).retrieve(
        "when does the staging database password rotate", EVERYTHING, k=3, at=NOW
    )
    assert found[0].id == "answer"


def test_without_the_gate_the_plain_weighted_sum_is_used() -> None:
    records = [
        rec("a", "alpha beta gamma", importance=0.2, created_at=ago(100)),
        rec("b", "alpha", importance=0.9, created_at=ago(1)),
    ]
    found = retriever(*records, gate=0.0).retrieve("alpha beta gamma", EVERYTHING, k=2, at=NOW)
    w = RetrievalWeights()
    for m in found:
        plain = w.alpha * m.relevance + w.beta * m.recency + w.gamma * m.importance
        assert m.score == pytest.approx(plain)


def test_an_empty_query_returns_the_most_recently_used() -> None:
    r = retriever(rec("old", created_at=ago(100)), rec("new", created_at=ago(1)))
    assert [m.id for m in r.retrieve("", EVERYTHING, k=2, at=NOW)] == ["new", "old"]


def test_a_query_that_matches_nothing_returns_nothing() -> None:
    assert retriever(rec("1", "apples")).retrieve("zeppelin", EVERYTHING, k=5, at=NOW) == []


def test_learned_value_feeds_the_delta_term() -> None:
    records = [
        rec("useful", "retry the flaky job", goal_values={"ci/fix": 0.9}, created_at=ago(5)),
        rec("useless", "retry the flaky job later", goal_values={"ci/fix": 0.1}, created_at=ago(5)),
    ]  # fmt: skip
    backend = InMemoryBackend()
    backend.add_many(records)
    w = RetrievalWeights(alpha=0.5, beta=0.0, gamma=0.0, delta=0.5)
    found = Retriever(backend, w).retrieve("flaky job", EVERYTHING, k=2, at=NOW, goal="ci/fix")
    assert [m.id for m in found] == ["useful", "useless"]
    assert found[0].value == 1.0 and found[1].value == 0.0


def test_embeddings_find_a_paraphrase_that_shares_no_word() -> None:
    embedder = ConceptEmbedder()
    with LongTermMemory(InMemoryBackend(), embedder=embedder) as ltm:
        ltm.remember("we adopted a puppy called Rex", agent="a", scope="global", at=NOW)
        ltm.remember("the sedan needs new tyres", agent="a", scope="global", at=NOW)
        found = ltm.recall("how is my dog", agent="a", at=NOW)
    assert found and found[0].content == "we adopted a puppy called Rex"
    assert found[0].similarity is not None and found[0].similarity > 0.9


def test_vectors_of_another_model_are_never_compared() -> None:
    backend = InMemoryBackend()
    with LongTermMemory(backend, embedder=ConceptEmbedder("model-a")) as ltm:
        ltm.remember("we adopted a puppy called Rex", agent="a", scope="global", at=NOW)
    with LongTermMemory(backend, embedder=ConceptEmbedder("model-b")) as other:
        # Same vector space by construction, different name: must not match.
        assert other.recall("how is my dog", agent="a", at=NOW) == []
        found = other.recall("puppy", agent="a", at=NOW)
    assert [m.content for m in found] == ["we adopted a puppy called Rex"]
    assert found[0].similarity is None


def test_similarity_is_cosine() -> None:
    embedder = ConceptEmbedder()
    with LongTermMemory(InMemoryBackend(), embedder=embedder) as ltm:
        ltm.remember("puppy and sedan", agent="a", scope="global", at=NOW)
        [m] = ltm.recall("puppy", agent="a", at=NOW)
    a, b = [1.0, 1.0, 0.0, 0.0, 0.1], [1.0, 0.0, 0.0, 0.0, 0.1]
    cos = sum(x * y for x, y in zip(a, b, strict=True)) / math.hypot(*a) / math.hypot(*b)
    assert m.similarity == pytest.approx(cos, rel=1e-5)
