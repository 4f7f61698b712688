"""How much of a request repeats the previous one: what a prompt cache can serve."""

from __future__ import annotations


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
