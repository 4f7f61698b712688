"""Crash-safe file writes: write-then-rename, create-if-absent, directory fsync.

A reader of the hive sees a file either absent or whole: content is written to a
temp name (ignored by every reader), fsynced, then renamed or linked into place.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Final, Literal

from hivemind.fs import diskspace
from hivemind.fs.flush import group_flush
from hivemind.fs.noreplace import exchange, link_new
from hivemind.fs.steps import Steps, run

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


_TEMP_NAME = re.compile(r"\A\..+\.(\d+)-[0-9a-f]{6}-\d+\.tmp\Z", re.DOTALL)


def temp_writer(name: str) -> int | None:
    """The pid of the process that made `name` with `temp_name`; None for other names."""
    return int(match.group(1)) if (match := _TEMP_NAME.match(name)) else None


def fsync_dir(path: Path) -> None:
    """Make renames and links inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
            view = view[diskspace.write(fd, view, tmp) :]
        if fsync:
            group_flush.flush(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


KEEP_MODE: Final = "keep"
"""`atomic_write`'s `mode` that looks up the permission bits of the file replaced."""


def _regular_file_mode(path: Path) -> int | None:
    """The permission bits of the regular file at `path`, which a write would replace;
    None if there is none (a new file gets the default mode)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None


def atomic_write_steps(
    path: Path, text: str, *, fsync: bool = True, mode: int | Literal["keep"] | None = KEEP_MODE
) -> Steps[None]:
    """Replace `path` with `text` in one step: readers see the old or the new file.

    The new file keeps the permission bits of the one it replaces: found by an lstat
    (`KEEP_MODE`), or given by a caller that has just stat'ed `path` (an int; None
    when nothing is there, which spends no syscall on the mode)."""
    tmp = _staged(path, text, _regular_file_mode(path) if mode == KEEP_MODE else mode)
    try:
        if fsync:
            yield [tmp]
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _staged(path: Path, text: str, mode: int | None) -> Path:
    """`text` in a temp file beside `path`, with `mode`'s permission bits (None: the
    default mode), ready to take its place."""
    tmp = write_temp(path.parent, path.name, text.encode("utf-8"), fsync=False)
    if isinstance(mode, int):
        try:
            # Before the rename: no reader sees the new file without it. The permission
            # bits only: setuid and setgid, which an ordinary write clears, never outlive
            # a rewrite here (nor the sticky bit).
            os.chmod(tmp, mode & 0o777)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return tmp


def rewrite_steps(path: Path, text: str, *, fsync: bool = True) -> Steps[bool]:
    """`atomic_write_steps` of a file that another process may move away meanwhile:
    the new text takes the place of the file only if it is still there (False, and
    nothing written, if it was moved first). Where files cannot be swapped in one
    step, the check and the replace are two (a moment apart)."""
    tmp = _staged(path, text, _regular_file_mode(path))
    try:
        if fsync:
            yield [tmp]
        swapped = exchange(tmp, path)
        if swapped is None:
            if not os.path.lexists(path):
                swapped = False
            else:
                os.replace(tmp, path)
                return True
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.unlink()  # the old version after a swap; the unused new one after a miss
    return swapped


def atomic_write(
    path: Path, text: str, *, fsync: bool = True, mode: int | Literal["keep"] | None = KEEP_MODE
) -> None:
    """Replace `path` with `text` in one step: readers see the old or the new file, with
    the old one's permission bits (see `atomic_write_steps`)."""
    run(atomic_write_steps(path, text, fsync=fsync, mode=mode))


def create_new_steps(path: Path, text: str, *, fsync: bool = True) -> Steps[bool]:
    """Create `path` whole with `text`; False (nothing written) if it already exists."""
    tmp = write_temp(path.parent, path.name, text.encode("utf-8"), fsync=False)
    try:
        if fsync:
            yield [tmp]
        created = link_new(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return created


def create_new(path: Path, text: str, *, fsync: bool = True) -> bool:
    """Create `path` whole with `text`; False (nothing written) if it already exists."""
    return run(create_new_steps(path, text, fsync=fsync))
