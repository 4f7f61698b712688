"""File names that are not valid UTF-8 (unpacked from an old zip, copied from another
system): Python lists them with lone surrogates (`caf\\udce9.md`) that no text file,
log or request can hold, so the hive never lets one reach an id, a block or a record.
"""

from __future__ import annotations

import os
import re

NOT_UTF8 = "the file name is not valid UTF-8"
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_utf8(name: str) -> bool:
    """True if `name` (as `os.listdir` gives it) is valid UTF-8 text."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(text: str) -> str:
    """`text` (a name, or a line that holds one) for people and files: each byte of a
    name that was not UTF-8 as `\\xe9` (`caf\\xe9.md`), any other lone surrogate as `�`."""
    return text if is_utf8(text) else _SURROGATE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    # 0xDC80-0xDCFF: how Python lists an undecodable byte (surrogateescape).
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


NAME_MAX = 255
"""Bytes in a file name, on Linux's filesystems."""
SHORT_SUFFIX = 10
"""Characters of an extension kept when a name is cut; a longer one is cut as the stem."""


def safe(name: str, limit: int = NAME_MAX) -> str:
    """`name` with each byte that is not UTF-8 replaced by `�` (U+FFFD): a valid name to
    keep such a file under, cut to fit `limit` bytes (each `�` takes three)."""
    if is_utf8(name):
        return name
    return fitted(_SURROGATE.sub("\ufffd", name), limit)


def fitted(name: str, limit: int = NAME_MAX, *, tag: str = "", mark: str = "") -> str:
    """`name` with `tag` before its extension (`m.md` and `-1`: `m-1.md`), its stem cut
    to fit `limit` bytes, `mark` where it was cut; a cut name keeps only a short extension."""
    stem, dot, suffix = name.rpartition(".")
    if not stem:
        stem, dot, suffix = name, "", ""
    whole = stem + tag + dot + suffix
    if len(os.fsencode(whole)) <= limit:
        return whole
    if len(suffix) > SHORT_SUFFIX:  # it could fill the name: cut it with the stem
        stem, dot, suffix = name, "", ""
    tail = mark + tag + dot + suffix
    room = limit - len(os.fsencode(tail))
    return _head(stem, room) + tail


def _head(text: str, room: int) -> str:
    """The longest start of `text` that takes at most `room` bytes, whole characters only."""
    used = 0
    for i, char in enumerate(text):
        used += len(os.fsencode(char))
        if used > room:
            return text[:i]
    return text


def not_utf8_reason(name: str) -> str:
    """The one line a person reads about such a name: what is wrong and what to do."""
    return f"{NOT_UTF8} ({shown(name)}); rename it"
