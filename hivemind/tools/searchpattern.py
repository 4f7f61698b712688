"""A search pattern, vetted before `regex` compiles it.

`regex` expands a counted repeat into that many copies at compile time:
`a{100000000}` takes gigabytes and `(?:(?:a{1000}){1000}){1000}` a billion copies,
before any match timeout can help. So counts are bounded one by one, and the size
the pattern could expand to is bounded from above without parsing it: a parser that
disagreed with `regex` about where a class or a comment ends could be fooled into
too low a figure, an upper bound that reads every brace cannot.
"""

from __future__ import annotations

from collections.abc import Callable

import regex

from hivemind.errors import ToolError

MAX_REPEAT = 1000
"""The largest count a repeat may have in `{n}`, `{n,}` or `{n,m}`."""
MAX_PATTERN_SIZE = 50_000
"""A bound on the elements the compiled pattern may hold (about 1 KB each, at worst)."""
_ESCAPE_CHARS = 10  # the longest escape that ends in a letter or digit: \U0001F600


def compile_pattern(text: str) -> regex.Pattern[str]:
    """The compiled pattern, or a ToolError that says what to change."""
    vet_pattern(text)
    try:
        # Not cached: the module's cache would keep every pattern a model tried.
        return regex.compile(text, cache_pattern=False)
    except regex.error as exc:
        raise ToolError(f"invalid pattern: {exc}") from exc
    except RecursionError:
        raise ToolError("invalid pattern: its groups nest too deeply") from None


def vet_pattern(text: str) -> None:
    """Refuse a pattern whose repeats would make compiling it slow or huge."""
    if len(text) > MAX_PATTERN_SIZE:
        raise ToolError(f"pattern is {len(text)} characters; the limit is {MAX_PATTERN_SIZE}")
    group_factor = 1  # the product of repeats that may apply to a group
    atom_copies = 0  # the copies made by repeats of a single character, escape or class
    next_newline = _NewlineFinder(text)
    start = text.find("{")
    while start >= 0:
        counts = _counted_repeat(text, start, next_newline)
        if counts is not None:
            count = _largest(text, start, counts)
            if _repeats_one_atom(text, start):
                atom_copies += count * _atom_width(text, start)
            else:
                group_factor *= max(count, 1)
            if group_factor * (len(text) + atom_copies) > MAX_PATTERN_SIZE:
                raise ToolError(
                    f"pattern too large: its counted repeats (the last at character {start}) "
                    f"would expand to more than {MAX_PATTERN_SIZE} elements; nest fewer "
                    "counted repeats, use smaller counts, or use * and + (write a literal "
                    "brace as \\{)"
                )
        start = text.find("{", start + 1)


def _largest(text: str, start: int, counts: list[str]) -> int:
    for digits in counts:
        if len(digits) > len(str(MAX_REPEAT)) or int(digits) > MAX_REPEAT:
            shown = digits if len(digits) <= 20 else digits[:20] + "..."
            raise ToolError(
                f"repeat count {shown} at character {start} of the pattern is above "
                f"{MAX_REPEAT}; use a smaller count, or + and * for an open-ended repeat "
                "(write a literal brace as \\{)"
            )
    return max(int(d) for d in counts)


def _counted_repeat(
    text: str, start: int, next_newline: Callable[[int], int]
) -> list[str] | None:
    """The counts of `{n}`, `{n,}`, `{,m}` or `{n,m}` opening at `start`, or None.

    Whitespace and `#` comments are skipped inside, as in verbose mode (`(?x)`
    reads `a{1 0#c\\n0}` as `a{100}`); treating them so always is the safe side.
    """
    before = start
    while before > 0 and text[before - 1] == "\\":
        before -= 1
    if (start - before) % 2:
        return None  # \{ is a literal brace
    counts = [""]
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "}":
            found = [c for c in counts if c]
            return found or None
        if ch.isdigit() and ch.isascii():
            counts[-1] += ch
        elif ch == "," and len(counts) == 1:
            counts.append("")
        elif ch == "#":
            newline = next_newline(i)
            if newline < 0:
                return None
            i = newline
        elif not ch.isspace():
            return None
        i += 1
    return None


def _repeats_one_atom(text: str, start: int) -> bool:
    """False when the repeat may apply to a group: after `)` (a group, or a comment after
    one), whitespace or a comment in verbose mode, or `}` / `>` (the safe side)."""
    if start == 0:
        return False
    before = text[start - 1]
    return not (before in ")}>" or before.isspace())


def _atom_width(text: str, start: int) -> int:
    """At least the length of the character, escape or class ending before `start`."""
    end = start - 1
    if text[end] == "]":
        first = text.find("[")
        return end - first + 1 if 0 <= first < end else 1
    backslash = text.rfind("\\", max(0, start - _ESCAPE_CHARS), start)
    return start - backslash if backslash >= 0 else 1


class _NewlineFinder:
    """`text.find("\\n", i)` for rising `i`, each newline searched for once (a pattern
    of many `{#` must not cost a scan to its end per brace)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._from = len(text) + 1
        self._found = -1

    def __call__(self, i: int) -> int:
        if not (self._from <= i and (self._found < 0 or self._found >= i)):
            self._from, self._found = i, self._text.find("\n", i)
        return self._found
