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


def safe(name: str, limit: int = 255) -> str:
    """`name` with each byte that is not UTF-8 replaced by `�` (U+FFFD): a valid name to
    keep such a file under, its stem cut to fit `limit` bytes (each `�` takes three)."""
    if is_utf8(name):
        return name
    fixed = _SURROGATE.sub("\ufffd", name)
    stem, dot, suffix = fixed.rpartition(".")
    if not stem:
        stem, suffix = fixed, ""
    tail = dot + suffix
    while len(os.fsencode(stem + tail)) > limit and len(stem) > 1:
        stem = stem[:-1]
    return stem + tail


def not_utf8_reason(name: str) -> str:
    """The one line a person reads about such a name: what is wrong and what to do."""
    return f"{NOT_UTF8} ({shown(name)}); rename it"
