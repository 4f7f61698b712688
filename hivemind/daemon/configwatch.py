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

from hivemind.errors import ConfigError, FileFormatError
from hivemind.fs.regular import read_regular
from hivemind.fs.statcache import Sig, sig_of
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive

logger = logging.getLogger(__name__)


def read_hive_toml(hive: Hive) -> bytes | None:
    """hive.toml's bytes; b"" if there is none (the same settings: every default), None
    if it cannot be read (or is no regular file of at most 256 KB: a FIFO must not hang
    the daemon's loop). Taken as the settings are read, it is what edits are told
    against, however late the watch starts."""
    try:
        return read_regular(hive.config_file, hive.root)
    except FileNotFoundError:
        return b""
    except (OSError, FileFormatError):
        return None


async def watch_hive_toml(
    hive: Hive, started_with: bytes | None, stopping: asyncio.Event, interval: float,
    each: Callable[[], None],
) -> None:
    """Until `stopping`: every `interval` seconds call `each()`, and tell of a change of
    hive.toml from `started_with` (its bytes when the daemon's settings were read), or of
    its return to them."""
    path = hive.config_file
    seen = _sig_of(path)
    told = _told(hive, read_hive_toml(hive), started_with, started_with)  # (edited before)
    while not stopping.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), interval)
        each()
        if (sig := _sig_of(path)) == seen:
            continue
        seen = sig
        told = _told(hive, read_hive_toml(hive), told, started_with)


def _told(
    hive: Hive, now: bytes | None, told: bytes | None, started_with: bytes | None
) -> bytes | None:
    """Tell of hive.toml as `now` unless that was told last (`told`); returns what is told."""
    if now == told:
        return told
    path = hive.config_file
    if now == started_with:
        logger.warning("%s is back as this daemon read it", hive.relative(path))
        return now
    try:
        load_hive_config(hive)
        problem = ""
    except ConfigError as exc:
        problem = f"; the new one is not valid: {exc}"
    logger.warning(
        "%s changed: this daemon keeps the settings it started with (restart it to "
        "use the new ones)%s", hive.relative(path), problem,
    )
    return now


def _sig_of(path: Path) -> Sig | None:
    try:
        return sig_of(os.stat(path))
    except OSError:
        return None
