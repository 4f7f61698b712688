"""One daemon per hive: an exclusive `flock` on the hive's folder itself, and on
`.hivemind/daemon.lock`, which holds the owner's pid for the message a second daemon
prints. The folder's lock cannot be deleted away (`rm -rf .hivemind`, `git clean
-fdX`): a lock file can, and a second daemon then started beside the first. Where
the filesystem cannot lock a folder (NFS), the lock file alone holds, with a warning.

The OS drops the locks when their process dies, so a stale lock from a killed
daemon is simply taken over. A second lock, `.hivemind/workers.lock`, keeps a new
daemon from running agents while worker processes of an old one still live.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
from pathlib import Path
from types import TracebackType

from hivemind.errors import HiveLockedError, LockUnavailableError
from hivemind.fs import diskspace
from hivemind.fs.flocks import holders
from hivemind.hive.layout import Hive

logger = logging.getLogger(__name__)


class HiveLock:
    """Context manager holding the hive's daemon lock."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self._fd: int | None = None
        self._root_fd: int | None = None

    def acquire(self) -> None:
        root_fd, problem = self._lock_folder()
        try:
            fd = self._pid_file()
        except BaseException:
            if root_fd is not None:
                os.close(root_fd)  # closing drops its lock
            raise
        self._root_fd, self._fd = root_fd, fd
        if problem:
            logger.warning(
                "%s: its folder cannot be locked here (%s): only %s keeps a second daemon "
                "out, so leave .hivemind/ in place while this one runs",
                self.hive.root, problem, self.hive.relative(self.hive.lock_file),
            )

    def _lock_folder(self) -> tuple[int | None, str]:
        """The hive's folder, locked; or None, and why, where its filesystem cannot lock a
        folder (NFS makes a flock a POSIX lock, which needs a descriptor open for writing)."""
        root_fd = os.open(self.hive.root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fcntl.flock(root_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(root_fd)
            raise HiveLockedError(self.hive.root, self._owner()) from None
        except OSError as exc:
            os.close(root_fd)
            return None, exc.strerror or str(exc)
        return root_fd, ""

    def _pid_file(self) -> int:
        """The lock file, locked, with this process's pid in it."""
        path = self.hive.lock_file
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # an older hivemind, which locks the file only
            pid = _read_pid(fd)
            os.close(fd)
            raise HiveLockedError(self.hive.root, pid) from None
        except OSError as exc:
            os.close(fd)
            raise LockUnavailableError(
                f"{path}: cannot be locked ({exc.strerror or exc}): hivemind run needs file "
                "locks to keep a second daemon off the hive (on NFS: a running lock manager)"
            ) from None
        os.ftruncate(fd, 0)
        try:
            diskspace.write(fd, f"{os.getpid()}\n".encode(), path)
            os.fsync(fd)
        except OSError as exc:
            if not diskspace.is_full(exc):
                os.close(fd)
                raise
            # Locked all the same: the pid only tells `hivemind status` who holds it.
            logger.warning("%s: the pid cannot be written (%s); the hive is locked all "
                           "the same", self.hive.relative(path), exc.strerror or exc)
        return fd

    def _owner(self) -> int | None:
        """The pid in the lock file (None if it is gone or empty)."""
        try:
            fd = os.open(self.hive.lock_file, os.O_RDONLY)
        except OSError:
            return None
        try:
            return _read_pid(fd)
        finally:
            os.close(fd)

    def refresh(self) -> None:
        """Write the lock file again if it was removed or replaced meanwhile (the hive
        stays locked by its folder; the file tells `hivemind status` who holds it)."""
        if self._fd is None:
            return
        try:
            if os.stat(self.hive.lock_file).st_ino == os.fstat(self._fd).st_ino:
                return
        except FileNotFoundError:
            pass
        try:
            fd = self._pid_file()
        except (OSError, HiveLockedError) as exc:
            logger.debug("%s: not written again: %s", self.hive.lock_file, exc)
            return
        old, self._fd = self._fd, fd
        with contextlib.suppress(OSError):
            os.close(old)
        logger.warning("%s was removed while the daemon runs: written again (%s)",
                       self.hive.relative(self.hive.lock_file),
                       "the hive stays locked all along" if self._root_fd is not None else
                       "the hive was not locked meanwhile: its folder cannot be locked here")

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        if self._root_fd is not None:
            fcntl.flock(self._root_fd, fcntl.LOCK_UN)
            os.close(self._root_fd)
            self._root_fd = None

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


# -- the workers lock -------------------------------------------------------------
# Each worker process of a daemon holds `.hivemind/workers.lock` shared for as long as
# it lives; a daemon that starts takes it exclusively (then lets it go) before it runs
# any agent. A worker left by a killed daemon still holds it, so a restart waits for it
# instead of running the same agents beside it. The kernel drops a dead process's lock.
# A worker takes it again, on a new file, before each cycle if its file was removed.

OLD_WORKERS_POLL = 0.1  # s between two looks while an earlier daemon's workers still run


def workers_lock_path(hive: Hive) -> Path:
    return hive.lock_file.with_name("workers.lock")


def hold_as_worker(hive: Hive) -> int | None:
    """In a worker process: take the workers lock shared until the process ends (the
    descriptor stays open). None if a daemon holds it exclusively: one that started
    after this worker's lead died, which the worker must leave alone."""
    fd = _open_lock(workers_lock_path(hive))
    if _try_flock(fd, fcntl.LOCK_SH):
        return fd
    os.close(fd)
    return None


def keep_holding(hive: Hive, fd: int) -> int:
    """In a worker, before a cycle: the workers lock held again if its file was removed
    (`rm -rf .hivemind`): a daemon started after this worker's lead died would otherwise
    make a new one and find it free. Returns the descriptor now held."""
    path = workers_lock_path(hive)
    try:
        held = os.fstat(fd)
        now = os.stat(path)
        if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fd
    except FileNotFoundError:
        pass
    except OSError:
        return fd  # cannot tell: keep what is held
    try:
        new = _open_lock(path)
    except OSError:
        return fd
    try:
        taken = _try_flock(new, fcntl.LOCK_SH)  # False: a daemon holds it for a moment
    except OSError:
        taken = False
    if not taken:
        os.close(new)  # the next cycle tries again
        return fd
    with contextlib.suppress(OSError):
        os.close(fd)  # its file is gone: nobody can see that lock any more
    return new


async def outlive_old_workers(hive: Hive, giving_up: asyncio.Event) -> bool:
    """In a daemon holding the hive lock: wait until no worker process of an earlier
    daemon runs any more (False if `giving_up` is set first). The lock is let go at once:
    this daemon's own workers take it shared."""
    path = workers_lock_path(hive)
    fd = _open_lock(path)
    try:
        if _try_flock(fd, fcntl.LOCK_EX):
            return True
        pids = ", ".join(map(str, holders(fd))) or "unknown"
        logger.warning(
            "waiting for the worker processes of an earlier daemon to exit (pid %s): they "
            "still run agents of this hive (they hold %s); Ctrl-C gives up",
            pids, hive.relative(path),
        )
        while not _try_flock(fd, fcntl.LOCK_EX):
            if giving_up.is_set():
                return False
            await asyncio.sleep(OLD_WORKERS_POLL)
        logger.warning("the earlier daemon's worker processes have exited: starting")
        return True
    finally:
        os.close(fd)


def _open_lock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)


def _try_flock(fd: int, how: int) -> bool:
    try:
        fcntl.flock(fd, how | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
