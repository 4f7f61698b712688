"""Who holds a `flock` on a file or folder, as the kernel lists them in /proc/locks.

Read without taking any lock, so a reader (`hivemind status`) never gets in the way
of a daemon that is starting.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def holders(fd: int) -> list[int]:
    """The pids holding a flock on `fd`'s file, as /proc/locks lists them ([] where there
    is no such file)."""
    st = os.fstat(fd)
    key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    pids = set()
    for line in lines:
        # "12: FLOCK  ADVISORY  READ  4242 00:2e:1234 0 EOF" (a waiter's has "->")
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == key:
            with contextlib.suppress(ValueError):
                pids.add(int(fields[4]))
    return sorted(pids)


def holders_of(path: Path, *, follow: bool = False) -> list[int]:
    """The pids holding a flock on `path` (a file or a folder; [] if it is not there);
    through a link only if `follow` (a path the user named, not one found in the hive)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        return []
    try:
        return holders(fd)
    finally:
        os.close(fd)
