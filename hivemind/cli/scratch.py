"""`run --scratch`: a fresh copy of a hive's own files, made without following a link.

A hive is someone else's folder (DESIGN §3): `knowledge -> /home/me` must not be
copied in and sent to the model, and `.hivemind -> /somewhere` must not have its
`scratch/` removed. The copy takes regular files and folders only, walks with its
own stack to `treewalk.MAX_DEPTH` levels, and says once what it left out.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from hivemind.cli.common import fail
from hivemind.fs.treewalk import MAX_DEPTH
from hivemind.hive.config import read_config_bytes
from hivemind.hive.layout import Hive, folder_link_out

SCRATCH_PARTS = ("hive.toml", "agents", "knowledge", "tasks", "mailboxes", "workspace",
                 "tools")
"""What is copied (hive.toml as the run reads it; tools/: the MCP servers ROMs name);
.hivemind/ is left out."""

_READ = (os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
         | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
_FOLDER = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class _LeftOut:
    """What the copy left out, by kind: how many, and the first (said once each)."""

    def __init__(self) -> None:
        self.kinds: dict[str, tuple[int, str]] = {}

    def add(self, kind: str, where: str) -> None:
        count, first = self.kinds.get(kind, (0, where))
        self.kinds[kind] = (count + 1, first)

    def lines(self) -> list[str]:
        return [f"scratch copy: {count} {kind} (first: {first[:200]})"
                for kind, (count, first) in self.kinds.items()]


_LINK = "link(s) left out: the copy does not read through a link"
_HARD = "file(s) with more than one hard link left out: one may be a file from outside the hive"
_DEEP = f"folder(s) more than {MAX_DEPTH} levels deep left out, as a run does"
_ODD = "entries that are no regular file or folder (a FIFO, a device) left out"
_FAILED = "entries that could not be read left out"


def scratch_copy(hive: Hive) -> tuple[Hive, list[str]]:
    """A fresh copy of the hive's own files under .hivemind/scratch/ (runtime state left
    out), and one line for each kind of thing left out. A hive a run would refuse for a
    link out of it, or whose .hivemind/ or .hivemind/scratch is a link, is refused in one
    line before anything is removed or copied."""
    dest = hive.state_dir / "scratch"
    if (problem := _refusal(hive, dest)) is not None:
        fail(problem)
    _remove_old(hive, dest)
    try:
        dest.mkdir(parents=True)
    except OSError as exc:
        fail(f"{hive.relative(dest)}: cannot make the scratch copy here ({exc.strerror})")
    if (raw := read_config_bytes(hive)) is not None:  # as the run reads it: links refused
        (dest / "hive.toml").write_bytes(raw)
    left = _LeftOut()
    for part in SCRATCH_PARTS[1:]:
        _copy_part(hive.root / part, dest / part, part, left)
    return Hive(dest), left.lines()


def _refusal(hive: Hive, dest: Path) -> str | None:
    """Why the hive gets no scratch copy (one line), or None."""
    for path in (hive.state_dir, dest):
        where = os.path.relpath(path, hive.root)  # as named: `relative` resolves links
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            break
        except OSError as exc:
            return f"{where}: cannot be read ({exc.strerror})"
        if stat.S_ISLNK(st.st_mode):
            return (f"{where}: a link; --scratch would remove and write "
                    "where it leads, and follows no link: remove the link")
        if not stat.S_ISDIR(st.st_mode):
            return (f"{where}: not a folder; --scratch needs a folder here: "
                    "move the file")
    return folder_link_out(hive)


def _remove_old(hive: Hive, dest: Path) -> None:
    """Remove the last scratch copy; a link in it is removed, never followed (rmtree)."""
    if not os.path.lexists(dest):
        return
    try:
        shutil.rmtree(dest)
    except (OSError, RecursionError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "too deep"
        fail(f"{hive.relative(dest)}: the old scratch copy cannot be removed ({why}); "
             "remove it by hand")


def _copy_part(src: Path, dst: Path, name: str, left: _LeftOut) -> None:
    """Copy the part `src` of the hive (a folder, or a file in its place) to `dst`."""
    try:
        st = os.lstat(src)
    except FileNotFoundError:
        return
    except OSError:
        left.add(_FAILED, name)
        return
    if stat.S_ISDIR(st.st_mode):
        _copy_tree(src, dst, name, left)
    else:
        _copy_entry(os.fspath(src), os.fspath(dst), st, name, left)


def _copy_tree(top: Path, dest: Path, name: str, left: _LeftOut) -> None:
    """Copy the folder `top` to `dest`: iterative, links not entered nor copied."""
    stack = [(os.fspath(top), os.fspath(dest), name, 0)]
    while stack:
        src, dst, rel, depth = stack.pop()
        try:
            fd = os.open(src, _FOLDER)  # a folder swapped for a link since is not entered
        except OSError:
            left.add(_FAILED, rel)
            continue
        try:
            os.mkdir(dst, 0o755)
            stack.extend(reversed(_copy_listed(fd, src, dst, rel, depth, left)))
        except OSError:
            left.add(_FAILED, rel)
        finally:
            os.close(fd)


def _copy_listed(fd: int, src: str, dst: str, rel: str, depth: int,
                 left: _LeftOut) -> list[tuple[str, str, str, int]]:
    """Copy the files of the open folder `fd` (at `src`); its folders to copy next."""
    below = []
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        where, path = f"{rel}/{entry.name}", os.path.join(src, entry.name)
        try:
            st = entry.stat(follow_symlinks=False)  # lstat, relative to `fd`
        except OSError:
            left.add(_FAILED, where)
            continue
        if not stat.S_ISDIR(st.st_mode):
            _copy_entry(path, os.path.join(dst, entry.name), st, where, left)
        elif depth + 1 >= MAX_DEPTH:
            left.add(_DEEP, where)
        else:
            below.append((path, os.path.join(dst, entry.name), where, depth + 1))
    return below


def _copy_entry(src: str, dst: str, st: os.stat_result, where: str, left: _LeftOut) -> None:
    """Copy one entry of lstat `st` if it is a regular file with one link."""
    if stat.S_ISLNK(st.st_mode):
        left.add(_LINK, where)
    elif not stat.S_ISREG(st.st_mode):
        left.add(_ODD, where)
    elif st.st_nlink > 1:
        left.add(_HARD, where)
    else:
        try:
            _copy_file(src, dst)
        except OSError:
            left.add(_FAILED, where)


def _copy_file(src: str, dst: str) -> None:
    """Copy a regular file's bytes and times, opened without following a link."""
    fd = os.open(src, _READ)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # changed since listed
            raise OSError(0, "changed while copied")
        with os.fdopen(os.open(dst, _WRITE, (st.st_mode & 0o777) | 0o600), "wb") as out:
            shutil.copyfileobj(f, out)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
