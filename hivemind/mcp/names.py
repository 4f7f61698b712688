"""The names a model calls a server's tools by: the server's own, unless the Messages
API would refuse it (only letters, digits, `_` and `-`, at most 64 with the
`mcp__<server>__` prefix): then a safe one, which the pool maps back to the server's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from hivemind.mcpspec import tool_name

MAX_NAME = 64  # the Messages API's limit on a tool's name
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def safe_names(server: str, names: Iterable[str]) -> dict[str, str]:
    """{name the model calls: the server's own name}, the same for every valid one."""
    room = MAX_NAME - len(tool_name(server, ""))
    out: dict[str, str] = {}
    own = sorted(set(names))
    for name in own:  # valid names first: a renamed one never takes theirs
        if _UNSAFE.search(name) is None and 0 < len(name) <= room:
            out[name] = name
    for name in own:
        if name in out and out[name] == name:
            continue
        safe = _UNSAFE.sub("_", name)[:room] or "tool"
        if safe in out:  # cut or changed into another's name: told apart by a digest
            digest = hashlib.sha256(name.encode()).hexdigest()[:8]
            safe = f"{safe[:max(room - 9, 1)]}_{digest}"
        out[safe] = name
    return out
