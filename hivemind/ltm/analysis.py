"""Text analysis for full-text retrieval: words, stop words, safe FTS5 queries.

User text never reaches FTS5's query parser as syntax: it is cut into words
(letters and digits only), stop words go, and each word is sent as a quoted
string, so quotes, `AND`, `NEAR`, `col:` or `*` in a question are just text.
"""

from __future__ import annotations

import re

# Same split as FTS5's unicode61 tokenizer: runs of letters and digits; `_` separates.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# `_WORD` on a text is `\w+` once `_` (the one word character that is not a letter or a
# digit) is a space; the plain class runs about a quarter faster in `re`.
_WORD_CHARS = re.compile(r"\w+")

MAX_QUERY_TERMS = 32
"""A pasted paragraph keeps its first 32 distinct words; more only costs time."""

# Function words plus the filler of conversation: they match most memories and
# rank none, and every matching row costs FTS5 time.
_STOP_TEXT = """
a about above after again against ago all almost along already also although always am among
an and another any anybody anyone anything anyway anywhere are aren around as at away be
became because become been before being below beside besides between both but by can cannot
could couldn d did didn do does doesn doing don done down during each either else enough etc
even ever every everybody everyone everything few for from further get gets getting give given
go goes going gone got gotten had hadn has hasn have haven having he her here hers herself him
himself his how however i if in indeed instead into is isn it its itself just kind know let
like ll m made make makes many maybe me might mine more most much must my myself need
neither never no nobody none nor not nothing now o of off oh ok okay on once one only onto or
other others otherwise our ours ourselves out over own per perhaps please quite rather re
really s same say says shall she should shouldn since so some somebody someone something
sometimes somewhat soon still such sure t than thank thanks that the their theirs them
themselves then there these they thing things think this those though through thus to too
toward towards u under unless until up upon us use used using ve very via want wanted wants
was wasn way we well were weren what whatever when whenever where whether which while who
whoever whom whose why will with within without would wouldn y yeah yes yet you your yours
yourself yourselves
"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_TEXT.split())

# Words that ask about memory rather than name what is remembered ("what did I
# mention about…"); dropped from queries only, never from stored text.
_QUESTION_TEXT = """ask asked asking recall recalled remember remembered remind reminded mention
mentioned mentioning said tell telling told talk talked talking discuss discussed previous
previously earlier conversation chat chatted"""
QUESTION_WORDS: frozenset[str] = frozenset(_QUESTION_TEXT.split())


def words(text: str) -> list[str]:
    """Lower-case words of `text` (letters and digits), in order, with repeats."""
    return _WORD_CHARS.findall(text.lower().replace("_", " "))


def query_terms(query: str, limit: int = MAX_QUERY_TERMS) -> list[str]:
    """The distinct content words of a query, in order; stop words only if nothing else."""
    seen: dict[str, None] = {}
    for w in words(query):
        if w not in STOP_WORDS and w not in QUESTION_WORDS and (len(w) > 1 or w.isdigit()):
            seen.setdefault(w, None)
    if not seen:
        # "who is she?" is all stop words; better some match than none at all.
        for w in words(query):
            if w not in QUESTION_WORDS:
                seen.setdefault(w, None)
    return list(seen)[:limit]


def fts_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression: any of the terms, each a quoted literal."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def stem(word: str) -> str:
    """A light English stemmer (plurals, -ing, -ed) for the in-memory backend."""
    for suffix, repl, keep in (
        ("sses", "ss", 4), ("ies", "y", 4), ("ing", "", 5), ("ed", "", 4), ("s", "", 3),
    ):  # fmt: skip
        if word.endswith(suffix) and len(word) >= keep and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + repl
    return word
