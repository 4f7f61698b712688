"""tasks/rejected/: where unreadable files go, whole and unchanged, with a `.reason`."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from hivemind.fs.atomic import atomic_write
from hivemind.fs.filenames import NOT_UTF8, fitted, is_utf8, not_utf8_reason, safe, shown
from hivemind.fs.noreplace import move_into
from hivemind.hive.layout import Hive

logger = logging.getLogger(__name__)

REASON_SUFFIX = ".reason"


def quarantine(hive: Hive, path: Path, reason: str) -> Path:
    """Move `path` (never rewritten) to tasks/rejected/ and write `<name>.reason`.

    Raises FileNotFoundError if the file is gone (another process moved it first).
    """
    hive.rejected_dir.mkdir(parents=True, exist_ok=True)
    name = path.name if not path.name.endswith(REASON_SUFFIX) else path.name + ".txt"
    if not is_utf8(name):
        # Kept under a name any tool can show; the reason says what it was.
        if NOT_UTF8 not in reason:
            reason = f"{reason}; also {not_utf8_reason(name)}"
        name = safe(name)
    short = fitted(name, _MAX_NAME, mark="…")  # room for `<name>.reason`
    if short != name:
        reason = f"{reason} (its {len(os.fsencode(name))}-byte name was too long to keep)"
    target = move_into(path, hive.rejected_dir, short)
    where = shown(hive.relative(path))  # once moved: a link's own name, not its target's
    # One line, whatever the reason text holds (a name in it may not be UTF-8).
    line = shown(" ".join(reason.split()))
    atomic_write(target.with_name(target.name + REASON_SUFFIX), line + "\n")
    moved_to = f"{hive.relative(target.parent)}/{target.name}"  # a link: its own name
    logger.warning("%s: rejected to %s: %s", where, shown(moved_to), line)
    return target


_MAX_NAME = 255 - len(REASON_SUFFIX) - 6
"""Bytes of a rejected file's name: room is left for `.reason` and move_unique's `-N`."""


def rejected(hive: Hive) -> list[tuple[Path, str]]:
    """Every rejected file with its reason (`""` if the reason file is missing). For
    people: a name that is not UTF-8 (put there by hand) is given as `caf\\xe9.md`."""
    if not hive.rejected_dir.is_dir():
        return []
    out = []
    for path in sorted(hive.rejected_dir.iterdir()):
        if path.name.endswith(REASON_SUFFIX) or path.name.startswith("."):
            continue
        reason = read_reason(path)
        if not is_utf8(path.name):
            reason = reason or not_utf8_reason(path.name)
        out.append((path.with_name(shown(path.name)), reason))
    return out


def read_reason(path: Path) -> str:
    """The text of `path`'s reason file ("" if there is none), never through a link and
    at most REASON_BYTES (a hive's reason file may be anything: it is only shown)."""
    try:
        fd = os.open(path.with_name(path.name + REASON_SUFFIX),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(REASON_BYTES)
        except OSError:
            return ""
    return data.decode("utf-8", errors="replace").strip()


REASON_BYTES = 4096
