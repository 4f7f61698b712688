"""One daemon per hive: an exclusive `flock` on `.hivemind/daemon.lock`.

The OS drops the lock when its process dies, so a stale lock from a killed
daemon is simply taken over; the file holds the owner's pid for the message
a second daemon prints.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from types import TracebackType

from hivemind.errors import HiveLockedError
from hivemind.hive.layout import Hive


class HiveLock:
    """Context manager holding the hive's daemon lock."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self._fd: int | None = None

    def acquire(self) -> None:
        path = self.hive.lock_file
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise HiveLockedError(self.hive.root, pid) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> HiveLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        raw = os.pread(fd, 32, 0).decode().strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None
