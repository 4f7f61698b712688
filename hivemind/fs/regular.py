"""Reading a settings file of a hive (hive.toml, ROM.md) as the hostile input it may be.

Only a regular file of bounded size, opened without following a link out of the
hive: a FIFO must not hang the reader, /dev/zero must not fill the memory, and a
link must not carry a file of the user's into the runtime.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.fs.paths import real_root

SETTINGS_FILE_LIMIT = 256 * 1024
"""hive.toml and ROM.md are settings a person writes: larger ones are refused (256 KB)."""

_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
          | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))


def read_regular(path: Path, root: Path, limit: int = SETTINGS_FILE_LIMIT) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes inside `root`.

    A link is followed only when it ends inside `root`; FileNotFoundError (and other
    OSErrors) propagate, FileFormatError says what kind of file was refused.
    """
    real = os.path.realpath(path)
    inside = real_root(os.fspath(root))
    if os.path.commonpath([real, inside]) != inside:
        raise FileFormatError(path, "is a link to a file outside the hive; it is not followed")
    try:
        # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
        fd = os.open(real, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since it was resolved
            raise FileFormatError(path, "is a link that changed while read; not followed") from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileFormatError(path, f"is {_kind(st.st_mode)}, not a regular file")
        if st.st_nlink > 1:  # its other name may be a file of the user's, outside the hive
            raise FileFormatError(path, "has another name (a hard link); it is not read")
        if _opened_outside(fd, inside):  # a folder on the way swapped for a link meanwhile
            raise FileFormatError(path, "is a link that changed while read; not followed")
        if st.st_size > limit:
            raise FileFormatError(path, too_big(st.st_size, limit))
        data = f.read(limit + 1)
    if len(data) > limit:  # it grew while read
        raise FileFormatError(path, too_big(len(data), limit))
    return data


def _opened_outside(fd: int, root: str) -> bool:
    """Whether what `fd` opened lies outside `root`, as the kernel names it now.

    O_NOFOLLOW guards only the last part of a path: this catches a folder on the way
    swapped for a link between resolving the path and opening it (Linux's /proc)."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return False  # no /proc: the resolved-path check before the open stands alone
    return os.path.commonpath([opened, root]) != root


def too_big(size: int, limit: int) -> str:
    """The one-line reason for a file over `limit` bytes."""
    return f"file is {size:,} bytes; the limit is {limit:,} ({limit // 1024} KB)"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
