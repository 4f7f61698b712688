"""Crash-safe file primitives: write-then-rename, no-replace moves, directory fsync.

A reader of the hive sees a file either absent or whole: content is written to a
temp name (ignored by every reader), fsynced, then renamed or linked into place.
"""

from __future__ import annotations

import errno
import itertools
import os
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# link(2) refused for reasons that say "this filesystem cannot", not "the name is taken".
_NO_LINK = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


_temp_seq = itertools.count()
_temp_salt = secrets.token_hex(3)


_NAME_HEAD = 200
"""Bytes of a name kept in its temp name: the whole must stay under NAME_MAX (255)."""


def _head(name: str) -> str:
    return os.fsdecode(os.fsencode(name)[:_NAME_HEAD])


def temp_name(name: str) -> str:
    """A unique hidden `.tmp` name for `name`; every hive reader skips it."""
    # pid + counter is unique among live processes; the salt covers a reused pid.
    return f".{_head(name)}.{os.getpid()}-{_temp_salt}-{next(_temp_seq)}.tmp"


def fsync_dir(path: Path) -> None:
    """Make renames and links inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_fsync_pool: ThreadPoolExecutor | None = None
_fsync_pool_lock = threading.Lock()


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_all(paths: list[Path]) -> None:
    """fsync many files at once: concurrent fsyncs share the filesystem's journal
    commits (group commit), so a batch costs little more than one fsync."""
    global _fsync_pool
    if len(paths) <= 1:
        for path in paths:
            _fsync_path(path)
        return
    with _fsync_pool_lock:
        if _fsync_pool is None:
            _fsync_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="hive-fsync")
    list(_fsync_pool.map(_fsync_path, paths))


def write_temp(directory: Path, name: str, data: bytes, *, fsync: bool = True) -> Path:
    """Write `data` to a new temp file in `directory` (fsynced unless told not to)."""
    tmp = directory / temp_name(name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileExistsError:  # a leftover of a crashed process with the same pid
        tmp = directory / f".{_head(name)}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def atomic_write(path: Path, text: str, *, fsync: bool = True) -> None:
    """Replace `path` with `text` in one step: readers see the old or the new file."""
    tmp = write_temp(path.parent, path.name, text.encode("utf-8"), fsync=fsync)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def link_new(src: Path, dst: Path) -> bool:
    """Move `src` to `dst` unless `dst` exists (then `src` stays and False is returned).

    link + unlink never replaces a file; where links are unsupported, a checked rename.
    """
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        if os.path.lexists(dst):
            return False
        os.rename(src, dst)
        return True
    try:
        os.unlink(src)
    except FileNotFoundError:
        # Someone moved `src` at the same moment: theirs wins, undo our copy.
        os.unlink(dst)
        raise
    return True


def create_new(path: Path, text: str, *, fsync: bool = True) -> bool:
    """Create `path` whole with `text`; False (nothing written) if it already exists."""
    tmp = write_temp(path.parent, path.name, text.encode("utf-8"), fsync=fsync)
    try:
        created = link_new(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return created


def move_into(src: Path, directory: Path, name: str | None = None) -> Path:
    """Rename `src` into `directory` (as `name`); if that name is taken, a unique one."""
    dst = directory / (name or src.name)
    if not os.path.lexists(dst):
        os.rename(src, dst)
        return dst
    return move_unique(src, directory, name)


def move_unique(src: Path, directory: Path, name: str | None = None) -> Path:
    """Move `src` into `directory` under `name` (or `stem-1.ext`, ...), never replacing.

    Raises FileNotFoundError if `src` disappeared (another process moved it first).
    """
    name = name or src.name
    stem, dot, suffix = name.rpartition(".")
    if not stem:
        stem, dot, suffix = name, "", ""
    for n in range(10_000):
        candidate = directory / (name if n == 0 else f"{stem}-{n}{dot}{suffix}")
        if os.path.lexists(candidate):
            continue
        if link_new(src, candidate):
            return candidate
    raise FileExistsError(f"{directory}: no free name for {name}")
