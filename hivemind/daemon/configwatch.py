"""hive.toml while the daemon runs: read once, at the start; an edit is told, not taken.

A person who edits hive.toml sees nothing change; a broken edit seems accepted. So
the daemon says so: the settings it keeps, and whether the new file is valid. One
stat a rescan interval while nothing changes; the file is read only when it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from hivemind.errors import ConfigError
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.hive.statcache import Sig, sig_of

logger = logging.getLogger(__name__)


async def watch_hive_toml(
    hive: Hive, stopping: asyncio.Event, interval: float, each: Callable[[], None]
) -> None:
    """Until `stopping`: every `interval` seconds call `each()`, and tell of a change of
    hive.toml since the last look (or of its return to what the daemon started with)."""
    path = hive.config_file
    started_with = _bytes_of(path)
    told, seen = started_with, _sig_of(path)
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), interval)
        each()
        if (sig := _sig_of(path)) == seen:
            continue
        seen, now = sig, _bytes_of(path)
        if now == told:
            continue
        told = now
        if now == started_with:
            logger.warning("%s is back as this daemon read it", hive.relative(path))
            continue
        try:
            load_hive_config(hive)
            problem = ""
        except ConfigError as exc:
            problem = f"; the new one is not valid: {exc}"
        logger.warning(
            "%s changed: this daemon keeps the settings it started with (restart it to "
            "use the new ones)%s", hive.relative(path), problem,
        )


def _sig_of(path: Path) -> Sig | None:
    try:
        return sig_of(os.stat(path))
    except OSError:
        return None


def _bytes_of(path: Path) -> bytes | None:
    """The file's bytes (None if it cannot be read)."""
    try:
        return path.read_bytes()
    except OSError:
        return None
