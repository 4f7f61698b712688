"""A search pattern, vetted before `regex` compiles it.

`regex` compiles each required copy of a repeat on its own: `a{100000000}` takes
gigabytes and `(?:(?:a{1000}){1000}){1000}` a billion copies, before any match timeout
can help; a set under full case folding, `(?fi)[\\w\\d]`, compiles to about 80 KB. So
the pattern is parsed by `regex`'s own parser (one of ours could disagree with it about
where a class or a comment ends, and be fooled into too low a figure) and its elements
are counted, each as many times as the minimum counts of the repeats around it say. An
upper bound is not copied, and matching `x{0,1000}` costs no more than `x*`: the match
timeout stops both.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

import regex

from hivemind.errors import ToolError

MAX_PATTERN_SIZE = 50_000
"""A bound on the elements the compiled pattern may hold (about 1 KB each, at worst)."""
FULL_FOLD_SET_SIZE = 200
"""The elements a [set] counts for under full case folding: it holds each string that
folds to one of its characters (ß: ss), about 150 KB in all."""

# Not regex's public API, but the very parser `regex.compile` runs: only what it reads
# can be trusted to be what is compiled.
_core: Any = importlib.import_module("regex._regex_core")


def compile_pattern(text: str) -> regex.Pattern[str]:
    """The compiled pattern, or a ToolError that says what to change."""
    vet_pattern(text)
    try:
        # Not cached: the module's cache would keep every pattern a model tried.
        return regex.compile(text, cache_pattern=False)
    except RecursionError:
        raise ToolError("invalid pattern: its groups nest too deeply") from None
    except Exception as exc:  # regex.error, or ValueError for flags such as (?au), or …
        raise ToolError(f"invalid pattern: {_reason(exc)}") from exc


def vet_pattern(text: str) -> None:
    """Refuse a pattern that is invalid or would compile to too many elements.

    It parses the whole pattern (up to ~0.5 s for the longest): call it off the loop."""
    if len(text) > MAX_PATTERN_SIZE:
        raise ToolError(
            f"pattern is {len(text)} characters; the limit is {MAX_PATTERN_SIZE}: "
            "search for a shorter part of it"
        )
    try:
        size = _Size.of(_parse(text))
    except RecursionError:
        raise ToolError("invalid pattern: its groups nest too deeply") from None
    except Exception as exc:  # the private parser raises what it likes: any is a refusal
        raise ToolError(f"invalid pattern: {_reason(exc)}") from exc
    if size.total > MAX_PATTERN_SIZE:
        raise ToolError(size.refusal())


def _parse(text: str) -> Any:
    """The tree `regex.compile(text)` builds before it compiles it (as its `_compile`)."""
    flags = 0
    while True:
        source = _core.Source(text)
        info = _core.Info(flags, source.char_type, {})
        source.ignore_space = bool(info.flags & _core.VERBOSE)
        try:
            parsed = _core._parse_pattern(source, info)
        except _core._UnscopedFlagSet:  # a global flag such as (?x) met late: parse again
            flags = info.global_flags
            continue
        if not source.at_end():
            raise regex.error("unbalanced parenthesis", text, source.pos)
        return parsed


def _reason(exc: Exception) -> str:
    """One line saying what is wrong, whatever the parser raised it as."""
    if isinstance(exc, KeyError):  # a table lookup inside the parser: (?V0)(?V1) in some
        return f"regex cannot parse it ({exc.args[0] if exc.args else 'no detail'})"
    return " ".join(str(exc).split()) or f"regex cannot parse it ({type(exc).__name__})"


@dataclass
class _Size:
    """The elements a parsed pattern compiles to, and what makes them so many."""

    total: int = 0
    full_fold: int = 0  # the part due to sets under full case folding
    calls: bool = False  # (?1), (?R): a called group is compiled up to 4 times
    # the repeats that copy the costliest part, outermost first
    chain: list[Any] = field(default_factory=list)

    @classmethod
    def of(cls, tree: Any) -> _Size:
        size = cls()
        size.total, size.chain = size._count(tree, 1, in_set=False)
        if size.calls:  # forwards and backwards (lookbehind), exact and fuzzy
            size.total *= 4
        return size

    def _count(self, node: Any, copies: int, in_set: bool) -> tuple[int, list[Any]]:
        """The elements of `node` compiled `copies` times, and the repeats that copy
        its costliest part."""
        own = _weight(node, in_set) * copies
        if own > copies and isinstance(node, _core.SetBase):
            self.full_fold += own
        self.calls = self.calls or isinstance(node, _core.CallGroup)
        repeat = isinstance(node, _core.GreedyRepeat)  # lazy and possessive ones too
        if repeat:  # the cap keeps the figures small: past it, all is refused anyway
            copies = min(copies * max(node.min_count, 1), MAX_PATTERN_SIZE + 1)
        in_set = in_set or isinstance(node, _core.SetBase)
        total, chain, heaviest = own, [], 0
        for child in _children(node):
            part, part_chain = self._count(child, copies, in_set)
            total += part
            if part > heaviest:
                heaviest, chain = part, part_chain
        if repeat and node.min_count > 1:
            chain = [node, *chain]
        return total, chain

    def refusal(self) -> str:
        """One line: why the pattern is refused and what to change."""
        head = f"pattern too large: it would compile to more than {MAX_PATTERN_SIZE} elements"
        if self.full_fold * 2 > self.total:
            return (
                f"{head}, as each [set] counts for {FULL_FOLD_SET_SIZE} under full case "
                "folding (flag f, or V1 with i); drop the f flag or use fewer sets"
            )
        if not self.chain:
            return f"{head}; use a shorter pattern, or search for a part of it"
        copies = 1
        for node in self.chain:
            copies *= node.min_count
        shown = " inside ".join(_repeat_text(node) for node in reversed(self.chain))
        return (
            f"{head}: the repeat {shown} makes {copies} copies of what it repeats; use a "
            "smaller minimum count (only the minimum is copied: x{0,1000}, x+ and x* cost "
            "nothing) or nest fewer counted repeats"
        )


def _weight(node: Any, in_set: bool) -> int:
    """The elements `node` compiles to, its children apart. Measured: an element is
    about 750 bytes, and no kind of node costs more than 1 KB an element."""
    if isinstance(node, _core.SetBase):
        full_fold = node.case_flags & _core.FULLIGNORECASE == _core.FULLIGNORECASE
        return FULL_FOLD_SET_SIZE if full_fold and node.positive and not in_set else 1
    if isinstance(node, _core.Character):
        return 1 if len(node.folded) == 1 else 6  # ß under full case folding: ss
    if isinstance(node, _core.Grapheme):
        return 6  # \X
    if isinstance(node, _core.String):
        return 1 + len(node.characters) // 32
    if isinstance(node, _core.Sequence):
        return 0  # its items one after the other, with nothing around them
    return 1


def _children(node: Any) -> list[Any]:
    """The parsed nodes directly inside `node`, whatever its kind."""
    found: list[Any] = []
    for value in vars(node).values():
        if isinstance(value, _core.RegexBase):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            found.extend(v for v in value if isinstance(v, _core.RegexBase))
    return found


def _repeat_text(node: Any) -> str:
    low, high = node.min_count, node.max_count
    if low == high:
        return f"{{{low}}}"
    return f"{{{low},{'' if high is None else high}}}"
