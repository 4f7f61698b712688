"""How much of a request repeats the previous one: what a prompt cache can serve."""

from __future__ import annotations

import json

from hivemind.llm.base import ModelRequest, ToolSpec


def common_prefix_length(a: str, b: str) -> int:
    """Length of the common prefix of two strings (bisection on slices: fast in C)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixReuse:
    """The share of each request (tools, system, context, in the order sent) that
    repeats a prefix of the one before it."""

    def __init__(self) -> None:
        self._last_request: str | None = None
        # (ids of the specs, their JSON, the specs: kept alive so no id is reused)
        self._tools_text: tuple[tuple[int, ...], str, list[ToolSpec]] | None = None

    def __call__(self, request: ModelRequest) -> float | None:
        """The share of `request` a prompt cache can serve; None for the first."""
        text = (self._tools_json(request.tools) + request.system
                + request.context_stable + request.context_volatile)
        previous, self._last_request = self._last_request, text
        if previous is None or not text:
            return None
        return common_prefix_length(previous, text) / len(text)

    def _tools_json(self, tools: list[ToolSpec]) -> str:
        """The tool definitions as sent; the registry hands out the same spec objects
        while the allow-list is unchanged, so they are dumped once."""
        key = tuple(id(t) for t in tools)
        if self._tools_text is None or self._tools_text[0] != key:
            self._tools_text = (key, json.dumps([t.model_dump() for t in tools]), tools)
        return self._tools_text[1]
