"""Trees thousands of folders deep, made and removed without recursion: a path 1,800
folders deep is over PATH_MAX, so each level is reached from the one above (a dir fd)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY


def deep_chain(top: Path, levels: int, notes: dict[int, str]) -> None:
    """`top/d/d/.../d` (`levels` folders), with a file `x.md` holding `notes[n]` in the
    folder `n` levels down."""
    fd = os.open(top, _DIR)
    try:
        for level in range(levels + 1):
            if level in notes:
                out = os.open("x.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                os.write(out, notes[level].encode())
                os.close(out)
            if level == levels:
                break
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", _DIR, dir_fd=fd)
            os.close(fd)
            fd = below
    finally:
        os.close(fd)


@contextlib.contextmanager
def removed_after(top: Path) -> Iterator[None]:
    """Remove the chain below `top` afterwards (shutil.rmtree recurses, and would fail)."""
    try:
        yield
    finally:
        remove_chain(top)


def remove_chain(top: Path) -> None:
    """Remove `top/d/d/...` bottom up, one level at a time, by changing directory."""
    here = os.getcwd()
    try:
        os.chdir(top)
        depth = 0
        while os.path.isdir("d"):
            os.chdir("d")
            depth += 1
        for _ in range(depth):
            for name in os.listdir("."):
                os.unlink(name)
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.chdir(here)
