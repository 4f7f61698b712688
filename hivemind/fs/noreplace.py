"""Moves that never replace a file: renameat2(RENAME_NOREPLACE), else link + unlink.

A file moved into a folder never takes the place of one already there: the move
fails (`link_new`) or finds a free name (`move_unique`).
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from hivemind.fs.filenames import fitted

# link(2) refused for reasons that say "this filesystem cannot", not "the name is taken".
_NO_LINK = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


def _load_renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    """Linux's renameat2(2), if this libc has it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return cast("Callable[[int, bytes, int, bytes, int], int]", fn)


_renameat2 = _load_renameat2()
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
# Once a filesystem says it cannot, link + unlink is used from then on.
_noreplace_refused: set[int] = set()


def _rename_noreplace(src: Path, dst: Path) -> bool | None:
    """One atomic rename that never replaces: True, False (`dst` exists), or None when
    this system or filesystem has no such rename."""
    if _renameat2 is None:
        return None
    source = os.fsencode(src)
    if _renameat2(_AT_FDCWD, source, _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        return False
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        _noreplace_refused.add(os.lstat(src).st_dev)
        return None
    raise OSError(err, os.strerror(err), os.fsdecode(source), None, os.fsdecode(dst))


_RENAME_EXCHANGE = 2


def exchange(src: Path, dst: Path) -> bool | None:
    """Swap two files in one atomic step (renameat2 RENAME_EXCHANGE): True; False if
    either was gone (moved away meanwhile); None where this system or filesystem
    cannot swap."""
    if _renameat2 is None:
        return None
    source = os.fsencode(src)
    if _renameat2(_AT_FDCWD, source, _AT_FDCWD, os.fsencode(dst), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT:
        return False
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return None
    raise OSError(err, os.strerror(err), os.fsdecode(source), None, os.fsdecode(dst))


def link_new(src: Path, dst: Path) -> bool:
    """Move `src` to `dst` unless `dst` exists (then `src` stays and False is returned).

    One rename(RENAME_NOREPLACE) where Linux has it; else link + unlink, which never
    replaces a file either; where links are unsupported, a checked rename.
    """
    if not _noreplace_refused or os.lstat(src).st_dev not in _noreplace_refused:
        moved = _rename_noreplace(src, dst)
        if moved is not None:
            return moved
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


def move_into(src: Path, directory: Path, name: str | None = None) -> Path:
    """Rename `src` into `directory` (as `name`); if that name is taken, a unique one."""
    dst = directory / (name or src.name)
    if not os.path.lexists(dst):
        try:
            os.rename(src, dst)
        except FileNotFoundError:
            if directory.is_dir() or not os.path.lexists(src):
                raise
            directory.mkdir(parents=True, exist_ok=True)  # made on first use
            os.rename(src, dst)
        return dst
    return move_unique(src, directory, name)


def move_unique(src: Path, directory: Path, name: str | None = None) -> Path:
    """Move `src` into `directory` under `name` (or `stem-1.ext`, ..., its stem cut when
    the `-N` would pass NAME_MAX), never replacing.

    Raises FileNotFoundError if `src` disappeared (another process moved it first).
    """
    name = name or src.name
    for n in range(10_000):
        candidate = directory / (name if n == 0 else fitted(name, tag=f"-{n}"))
        if os.path.lexists(candidate):
            continue
        if link_new(src, candidate):
            return candidate
    raise FileExistsError(f"{directory}: no free name for {name}")
