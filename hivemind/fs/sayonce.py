"""Warnings about a file, said once per process: a file looked at by every agent, the
status writer and the idle check is the same problem each time, not a new one."""

from __future__ import annotations

import logging
import threading

MAX_KEPT = 10_000
"""Problems remembered at most (then forgotten all at once: said again, never lost)."""

_said: set[tuple[object, ...]] = set()
_lock = threading.Lock()


def warn_once(logger: logging.Logger, key: tuple[object, ...], msg: str, *args: object) -> None:
    """`logger.warning(msg, *args)` unless the same `key` (e.g. the path, its inode and
    the problem) was warned of already in this process."""
    with _lock:
        if key in _said:
            return
        if len(_said) >= MAX_KEPT:
            _said.clear()
        _said.add(key)
    logger.warning(msg, *args)
