"""The disk under the hive: every durable write's bytes go through `write`, so a full
disk is told apart from any other failure, and a probe says when space is back.

`write` is the one seam between the hive's writers (task files, mail, workspace and
knowledge files, the audit log) and the kernel: a test swaps it to make the disk
"fill up" and "empty" again, without a filesystem of its own.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from hivemind.errors import DiskFullError

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errnos of a full disk (or a spent quota): nothing written succeeds until space
is freed."""
PROBE_BYTES = 64 * 1024


def write(fd: int, data: bytes | memoryview, path: Path) -> int:
    """`os.write` of a durable write of `path` (the seam; see the module's docstring)."""
    return os.write(fd, data)


def is_full(exc: BaseException) -> bool:
    """True if `exc` says the disk (or the quota) is full: an OSError, or the error of
    the memory store (SQLite's SQLITE_FULL) translated where it entered."""
    if isinstance(exc, OSError):
        return exc.errno in NO_SPACE
    cause = exc.__cause__
    return isinstance(cause, sqlite3.Error) and cause.sqlite_errorcode == sqlite3.SQLITE_FULL


def full_error(exc: Exception, hive_root: Path) -> DiskFullError:
    """`exc` (a full disk) as the runtime's error, naming the file it could not write."""
    if not isinstance(exc, OSError):  # the memory store's
        return DiskFullError(errno.ENOSPC, str(exc))
    code, text = exc.errno or errno.ENOSPC, exc.strerror or os.strerror(errno.ENOSPC)
    if exc.filename is None:  # a flush names no file
        return DiskFullError(code, f"{text} (under {hive_root})")
    return DiskFullError(code, text, os.fsdecode(exc.filename))


def has_space(folder: Path) -> bool:
    """Try writing a small file in `folder` (then remove it): True if it fit. A full
    disk says False; any other failure is raised (the caller says what it is)."""
    path = folder / f".space-probe.{os.getpid()}.tmp"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as exc:
        if is_full(exc):
            return False
        raise
    try:
        view = memoryview(bytes(PROBE_BYTES))
        while view:
            view = view[write(fd, view, path) :]
    except OSError as exc:
        if is_full(exc):
            return False
        raise
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return True
