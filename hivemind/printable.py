"""Text from a hive or a server made safe to print: the control characters a terminal
acts on (escape sequences that clear, retitle or hide; bells, backspaces; bidi
overrides that reverse what is read) shown as U+FFFD, whatever wrote them."""

from __future__ import annotations

_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_UNPRINTABLE = {c: "\ufffd" for c in [*range(0x20), *range(0x7F, 0xA0), *_BIDI]
                if c not in (0x09, 0x0A, 0x0D)}
_UNPRINTABLE_LINE = _UNPRINTABLE | {0x09: " ", 0x0A: " ", 0x0D: " "}


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` with the control characters a terminal acts on (escape sequences, bells,
    backspaces, bidi overrides) shown as U+FFFD: what a server says reaches the console,
    `status` and `log`. Tabs and line ends (`\n`, `\r\n`) are kept, unless `one_line`
    (then each is a space)."""
    return text.translate(_UNPRINTABLE_LINE if one_line else _UNPRINTABLE)
