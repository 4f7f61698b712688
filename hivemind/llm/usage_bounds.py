"""Token figures an endpoint reports, checked before anything counts them.

An endpoint is someone else's server (`ANTHROPIC_BASE_URL`, a proxy): its usage
figures drive budgets and costs, so one that says `input_tokens: 1e30` must not
spend a year's budget or show a cost of $3e24. A figure that is no count, negative,
or beyond what one call can hold is clamped, and the clamp is said.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from hivemind.llm.base import Usage

logger = logging.getLogger(__name__)

MAX_PROMPT_TOKENS = 2_000_000
"""Input tokens one call can hold, at most (twice the largest context window)."""

_FIGURES = (  # (our field, the API's name)
    ("input_tokens", "input_tokens"),
    ("cache_write_tokens", "cache_creation_input_tokens"),
    ("cache_read_tokens", "cache_read_input_tokens"),
    ("output_tokens", "output_tokens"),
)


def bounded_usage(raw: Any, max_output: int) -> tuple[Usage, str | None]:
    """The usage of one reply (`raw`: the SDK's usage object) with each figure a count
    within bounds (output: at most `max_output`, the reply's limit), and what was
    clamped, in one line (None if nothing was)."""
    figures: dict[str, int] = {}
    clamped: list[str] = []
    for ours, theirs in _FIGURES:
        value = getattr(raw, theirs, None)
        limit = max_output if ours == "output_tokens" else MAX_PROMPT_TOKENS
        figures[ours], why = _count(value, limit)
        if why:
            clamped.append(f"{theirs}={_shown(value)} {why}")
    if not clamped:
        return Usage(**figures), None
    note = ("the endpoint reported usage out of bounds, clamped: " + "; ".join(clamped))
    logger.warning("%s", note)
    return Usage(**figures), note


def _count(value: Any, limit: int) -> tuple[int, str | None]:
    """`value` as a token count within 0..`limit`, and why it was changed (if it was)."""
    if value is None:
        return 0, None  # an optional figure left out
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0, "is no number: counted as 0"
    if isinstance(value, float) and not math.isfinite(value):
        return 0, "is no finite number: counted as 0"
    if value < 0:
        return 0, "is negative: counted as 0"
    if value > limit:
        return limit, f"is over {limit:,}: counted as {limit:,}"
    return int(value), None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
