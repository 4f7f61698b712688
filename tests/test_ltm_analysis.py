"""Query analysis, the importance heuristic, consolidation picks, and time parsing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivemind.ltm.analysis import _WORD, fts_query, query_terms, words
from hivemind.ltm.consolidation import block_importance, memorable
from hivemind.ltm.importance import heuristic_importance
from hivemind.ltm.jsonl import parse_time
from hivemind.memory.blocks import HistoryBlock


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("What did I say my sister's name was?", ["sister", "name"]),
        ("Where do I live now?", ["live"]),
        ("who is she?", ["who", "is", "she"]),  # all stop words: keep them rather than nothing
        ('say "hi" AND NEAR(x) col:y', ["hi", "near", "col"]),
        ("snake_case and café", ["snake", "case", "café"]),
        ("in 2023 or 5", ["2023", "5"]),
        ("", []),
        ("?!", []),
    ],
)
def test_query_terms(query: str, terms: list[str]) -> None:
    assert query_terms(query) == terms


@settings(max_examples=500)
@given(st.text(st.characters(codec="utf-8"), max_size=40) | st.text("aZ_İé 1.-ßᾈ", max_size=20))
def test_words_split_as_the_tokenizer_does(text: str) -> None:
    """Runs of letters and digits of the lower-cased text, `_` separating (`_WORD`)."""
    assert words(text) == _WORD.findall(text.lower())


def test_fts_query_quotes_every_term() -> None:
    assert fts_query(["a", 'b"c']) == '"a" OR "b""c"'


def test_query_terms_are_capped() -> None:
    assert len(query_terms(" ".join(f"word{i}" for i in range(100)))) == 32


@pytest.mark.parametrize(
    ("higher", "lower"),
    [
        ("We decided to never deploy on Fridays after the outage.", "ok thanks!"),
        ("My sister Anna moved to Denver in 2021.", "That sounds lovely, tell me more."),
        ("The backup failed: disk full on db-2", "What time is it?"),
    ],
)
def test_heuristic_importance_prefers_facts_and_decisions(higher: str, lower: str) -> None:
    assert heuristic_importance(higher) > heuristic_importance(lower)


def test_heuristic_importance_is_within_zero_and_one() -> None:
    assert heuristic_importance("") == 0.0
    text = "critical urgent decided failed password " * 20 + " My Anna 2024"
    assert 0.0 <= heuristic_importance(text) <= 1.0


def test_block_importance_prefers_metadata() -> None:
    assert block_importance(HistoryBlock(action="x", metadata={"importance": 0.9})) == 0.9
    assert block_importance(HistoryBlock(action="x", metadata={"importance": 8})) == 0.8
    plain = HistoryBlock(action="note", detail="ok")
    assert block_importance(plain) == heuristic_importance(plain.inline_content())


def test_memorable_judges_a_changed_block_again() -> None:
    block = HistoryBlock(action="note", detail="ok")
    assert memorable([block], 0.7) == []
    block.detail = "we decided to never deploy on Friday: the release failed, critical"
    [picked] = memorable([block], 0.7)
    assert picked.content == block.inline_content()
    assert picked.importance == heuristic_importance(block.inline_content())
    block.result = "ok"
    assert memorable([block], 0.7)[0].content.endswith("-> ok")
    block.metadata["importance"] = 0.1  # a given importance still wins
    assert memorable([block], 0.7) == []


def test_memorable_keeps_order_and_threshold() -> None:
    blocks = [
        HistoryBlock(action=f"a{i}", metadata={"importance": imp})
        for i, imp in enumerate([0.69, 0.7, 0.95, 0.1])
    ]
    assert [m.content for m in memorable(blocks, 0.7)] == ["a1", "a2"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T14:30:00Z", datetime(2024, 5, 1, 14, 30, tzinfo=UTC)),
        ("2024-05-01T16:30:00+02:00", datetime(2024, 5, 1, 14, 30, tzinfo=UTC)),
        ("2024-05-01", datetime(2024, 5, 1, tzinfo=UTC)),
        ("2023/05/20 (Sat) 02:21", datetime(2023, 5, 20, 2, 21, tzinfo=UTC)),
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (1714573800, datetime(2024, 5, 1, 14, 30, tzinfo=UTC)),
    ],
)
def test_parse_time(text: str | int, expected: datetime) -> None:
    assert parse_time(text) == expected


def test_parse_time_names_the_bad_value() -> None:
    with pytest.raises(ValueError, match="'soon' is not an ISO 8601"):
        parse_time("soon")
