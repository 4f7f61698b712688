"""Spans of time as people write them: `90`, `90s`, `5m`, `1h30m`, `500ms`, `2d`.

Every setting that takes seconds (a ROM's heartbeat, hive.toml's timeouts and
intervals) takes `Seconds`; a plain number is still seconds.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: Any) -> Any:
    """Seconds from a duration as people write it: `90`, `90s`, `5m`, `1h30m`, `500ms`, `2d`
    (a plain number is seconds); anything else is a one-line error with an example."""
    if isinstance(value, str):
        text = value.strip()
        try:
            total = float(text)
        except ValueError:
            total, end = 0.0, 0
            for part in _DURATION_PART.finditer(text):
                if part.start() != end:
                    break
                total += float(part.group(1)) * _UNIT_SECONDS[part.group(2).lower()]
                end = part.end()
            if not text or end != len(text):
                total = math.nan
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value):
            return value  # as given, so a bound's message shows it as written
        total = math.nan
    elif isinstance(value, bool):
        total = math.nan
    else:
        return value  # pydantic's own "must be a number"
    if not math.isfinite(total):
        raise ValueError(f"{value!r} is not a duration; write 5m, 1h30m or 90s")
    return total


Seconds = Annotated[float, BeforeValidator(parse_duration)]
"""A span of time in seconds, written `90`, `90s`, `5m`, `1h30m`, `500ms` or `2d`."""
