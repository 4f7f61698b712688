"""What a call cost, in US dollars, from its token usage and a price table."""

from __future__ import annotations

from collections.abc import Mapping

from hivemind.llm.base import Usage
from hivemind.settings import Price

_PER_MILLION = 1_000_000


def price_for(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of the longest known id `model` starts with (ids may carry a date suffix)."""
    known = [key for key in prices if model.startswith(key)]
    return prices[max(known, key=len)] if known else None


def estimate_cost(usage: Usage, model: str, prices: Mapping[str, Price]) -> float | None:
    """US$ for `usage` on `model`; None when the model has no known price."""
    price = price_for(model, prices)
    if price is None:
        return None
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_write_tokens * price.cache_write
        + usage.cache_read_tokens * price.cache_read
    ) / _PER_MILLION
