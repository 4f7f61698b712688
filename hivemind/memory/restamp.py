"""Whether a block made anew is the last one but for its time.

Perception makes its ROM, task and status blocks anew every cycle, stamped with
the time; what was worked out for the previous block (its estimate, its rendered
entry) holds for the new one, but for its time.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any


def same_but_timestamp(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True if two blocks' field dicts (`__dict__`) differ at most in `timestamp`.

    Values are compared as the context would render them: 1 is not True nor 1.0,
    dict key order counts, an object of another kind only matches itself.
    """
    if len(a) != len(b):
        return False
    for key, value in a.items():
        if key == "timestamp":
            continue
        other = b.get(key, _ABSENT)
        if value is not other and not _same_value(value, other):
            return False
    return True


_ABSENT = object()


def _same_value(x: Any, y: Any) -> bool:
    """Equal, and of the same type all the way down (see `same_but_timestamp`)."""
    kind = type(x)
    if kind is not type(y):
        return False
    if kind is str or kind is int or kind is bool:
        return bool(x == y)
    if kind is float:
        # 0.0 and -0.0 are equal but render differently; NaN never matches.
        return bool(x == y) and math.copysign(1.0, x) == math.copysign(1.0, y)
    if kind is dict:
        return len(x) == len(y) and all(
            (kx is ky or _same_value(kx, ky)) and (vx is vy or _same_value(vx, vy))
            for (kx, vx), (ky, vy) in zip(x.items(), y.items(), strict=True)
        )
    if kind is list or kind is tuple:
        return len(x) == len(y) and all(
            vx is vy or _same_value(vx, vy) for vx, vy in zip(x, y, strict=True)
        )
    if kind is datetime:
        return bool(x == y) and x.utcoffset() == y.utcoffset()
    return False  # None and enum members are singletons: `is` already said yes

