"""RelevanceScorer: confidence × recency × keyword overlap (× recent files), capped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hivemind.memory.blocks import (
    ContextBlock,
    FileBlock,
    HistoryBlock,
    KnowledgeBlock,
    MessageBlock,
    RomBlock,
    StatusBlock,
    TaskBlock,
)
from hivemind.memory.relevance import RelevanceScorer, RelevanceWeights, keywords

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def scorer(**weights: object) -> RelevanceScorer:
    return RelevanceScorer(RelevanceWeights(**weights), now=lambda: NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("age_hours", "expected"),
    [
        pytest.param(0, 0.8, id="fresh"),
        pytest.param(1, 0.4, id="one-hour-halves"),
        pytest.param(3, 0.2, id="three-hours-quarter"),
    ],
)
def test_recency_is_one_over_one_plus_age_in_hours(age_hours: float, expected: float) -> None:
    block = FileBlock(location="a.py", confidence=0.8, timestamp=NOW - timedelta(hours=age_hours))
    assert scorer().score(block) == pytest.approx(expected)


def test_a_block_from_the_future_counts_as_fresh() -> None:
    block = FileBlock(location="a.py", confidence=0.5, timestamp=NOW + timedelta(hours=2))
    assert scorer().score(block) == pytest.approx(0.5)


def test_each_shared_task_keyword_adds_a_fifth() -> None:
    s = scorer(cap=None)
    s.set_task("Fix the login timeout in the auth module")
    note = KnowledgeBlock(topic="auth timeout", location="knowledge/auth.md", confidence=0.5,
                          timestamp=NOW)
    # shared: auth, timeout (the path adds "knowledge" and "auth" again: a set)
    assert s.score(note) == pytest.approx(0.5 * (1 + 0.2 * 2))


def test_stop_words_are_not_keywords() -> None:
    assert keywords("the and of a Fix THE auth") == frozenset({"fix", "auth"})


def test_recently_used_files_get_a_boost() -> None:
    s = scorer(cap=None)
    block = FileBlock(location="workspace/a.py", confidence=0.5, timestamp=NOW)
    s.set_recent_files(["workspace/a.py"])
    assert s.score(block) == pytest.approx(0.75)


def test_the_score_is_capped_at_one_by_default() -> None:
    s = scorer()
    s.set_task("auth timeout")
    note = KnowledgeBlock(topic="auth timeout", location="k/auth.md", timestamp=NOW)
    assert s.score(note) == 1.0


def test_weights_are_configurable() -> None:
    s = scorer(recency_hours=2.0, keyword_boost=0.5, cap=None)
    s.set_task("deploy")
    block = HistoryBlock(action="deploy", confidence=1.0, timestamp=NOW - timedelta(hours=2))
    assert s.score(block) == pytest.approx(0.5 * 1.5)


def test_naive_timestamps_are_taken_as_utc() -> None:
    naive = FileBlock(location="a.py", timestamp=datetime(2026, 1, 1, 11, 0))
    assert scorer().score(naive) == pytest.approx(0.5)


def test_only_a_real_change_bumps_the_generation() -> None:
    s = scorer()
    s.set_task("fix the auth timeout")
    before = s.generation
    s.set_task("Fix the AUTH timeout!")  # the same keywords
    s.set_recent_files([])
    assert s.generation == before
    s.set_task("deploy")
    s.set_recent_files(["a.py"])
    s.weights = RelevanceWeights(cap=None)
    assert s.generation == before + 3


def test_a_blocks_file_path_names_the_file_as_the_generic_lookup_would() -> None:
    blocks = [
        FileBlock(location="src/a.py"), RomBlock(agent="a", location="agents/a/ROM.md"),
        KnowledgeBlock(topic="t", location="knowledge/t.md"), TaskBlock(task_id="t"),
        TaskBlock(task_id="u", location="tasks/u.md"), TaskBlock(task_id="v", location=""),
        MessageBlock(from_agent="a", to_agent="b", full_path="mailboxes/b/new/1.md"),
        StatusBlock(status_type="s"), HistoryBlock(action="x"),
        ContextBlock(context_type="c", summary="s"),
    ]
    for block in blocks:
        path = getattr(block, "location", None) or getattr(block, "full_path", None)
        assert block.file_path() == (path if isinstance(path, str) else None)
