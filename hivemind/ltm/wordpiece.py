"""BERT's uncased WordPiece tokenizer in plain Python, for the light MiniLM (`minilm`).

It reproduces what the `tokenizers` library does with MiniLM's `tokenizer.json`
(BertNormalizer with lowercasing and accent stripping, BertPreTokenizer, WordPiece
with `##` continuations), so the vectors match sentence-transformers' without that
dependency; bench/bench_embeddings.py checks it token for token.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from pathlib import Path

CLS, SEP, UNK = "[CLS]", "[SEP]", "[UNK]"
MAX_WORD_CHARS = 100  # a longer word is one [UNK], as in BERT


def _is_control(char: str) -> bool:
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_punctuation(char: str) -> bool:
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F
    )  # fmt: skip


def normalise(text: str) -> str:
    """Clean, space out CJK characters, lowercase and strip accents (BertNormalizer)."""
    out: list[str] = []
    for char in text:
        cp = ord(char)
        if cp in (0, 0xFFFD) or _is_control(char):
            continue
        if _is_whitespace(char):
            out.append(" ")
        elif _is_cjk(cp):
            out.append(f" {char} ")
        else:
            out.append(char)
    lowered = "".join(out).lower()
    return "".join(c for c in unicodedata.normalize("NFD", lowered)
                   if unicodedata.category(c) != "Mn")


def pre_tokenise(text: str) -> list[str]:
    """Split on whitespace, every punctuation character a word of its own."""
    words: list[str] = []
    for chunk in text.split():
        current = ""
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append(current)
                words.append(char)
                current = ""
            else:
                current += char
        if current:
            words.append(current)
    return words


class WordPiece:
    """Text → token ids with MiniLM's vocabulary (`vocab.txt`, one token a line)."""

    def __init__(self, vocab_file: Path) -> None:
        tokens = vocab_file.read_text(encoding="utf-8").splitlines()
        self.vocab = {token: i for i, token in enumerate(tokens)}
        self.cls, self.sep, self.unk = self.vocab[CLS], self.vocab[SEP], self.vocab[UNK]
        self._word = lru_cache(maxsize=65_536)(self._pieces)

    def _pieces(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match WordPiece of one word; [UNK] if any part is unknown."""
        if len(word) > MAX_WORD_CHARS:
            return (self.unk,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk,)
            pieces.append(found)
            start = end
        return tuple(pieces)

    def encode(self, text: str, max_length: int) -> list[int]:
        """[CLS] + word pieces + [SEP], cut to `max_length` ids in all."""
        ids = [self.cls]
        for word in pre_tokenise(normalise(text)):
            ids.extend(self._word(word))
            if len(ids) >= max_length - 1:
                break
        return [*ids[: max_length - 1], self.sep]
