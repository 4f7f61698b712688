"""TokenCounter: offline encoding, digest cache, conservative size estimates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
