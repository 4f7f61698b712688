"""BERT's uncased WordPiece in plain Python (the light MiniLM's tokenizer): as BERT does it.

bench/bench_embeddings.py checks it token for token against the `tokenizers` library
on real text; these cases pin each rule on a small vocabulary."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivemind.ltm.wordpiece import WordPiece, normalise, pre_tokenise

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "bee", "##s", "hive", "honey",
         "make", "cafe", "un", "##want", "##ed", ",", ".", "!", "'", "t", "don", "a", "b",
         "我", "flower", "##ing", "queen", "water"]  # fmt: skip


def vocab_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return path


def ids(*tokens: str) -> list[int]:
    return [VOCAB.index(t) for t in tokens]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("The bees make honey!", ["the", "bee", "##s", "make", "honey", "!"],
                     id="lowercase-and-punctuation"),
        pytest.param("unwanted", ["un", "##want", "##ed"], id="longest-match-pieces"),
        pytest.param("Café", ["cafe"], id="accents-stripped"),
        pytest.param("don't", ["don", "'", "t"], id="apostrophe-splits"),
        pytest.param("flowering zebra", ["flower", "##ing", "[UNK]"], id="unknown-word"),
        pytest.param("我bee", ["我", "bee"], id="cjk-is-its-own-word"),
        pytest.param("the\u200b\x00 hive\u00a0\tqueen", ["the", "hive", "queen"],
                     id="invisible-and-odd-whitespace"),
        pytest.param("", [], id="empty"),
    ],
)
def test_wordpiece_tokenises_as_bert_does(tmp_path: Path, text: str, expected: list[str]) -> None:
    tokenizer = WordPiece(vocab_file(tmp_path))
    assert tokenizer.encode(text, 64) == ids("[CLS]", *expected, "[SEP]")


def test_wordpiece_cuts_long_texts_and_very_long_words(tmp_path: Path) -> None:
    tokenizer = WordPiece(vocab_file(tmp_path))
    cut = tokenizer.encode("bee " * 100, 8)
    assert cut == ids("[CLS]", *["bee"] * 6, "[SEP]")
    assert tokenizer.encode("a" * 101, 8) == ids("[CLS]", "[UNK]", "[SEP]")
    assert pre_tokenise(normalise("U.S.A.")) == ["u", ".", "s", ".", "a", "."]
