"""Crash-safe file primitives: write-then-rename, no-replace moves, directory fsync.

A reader of the hive sees a file either absent or whole: content is written to a
temp name (ignored by every reader), fsynced, then renamed or linked into place.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import itertools
import os
import re
import secrets
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Final, Literal, TypeVar, cast

from hivemind.fs import diskspace
from hivemind.fs.filenames import fitted

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


def _libc_function(name: str, *argtypes: type) -> Callable[..., int] | None:
    """A Linux libc function by name (None elsewhere, or if libc lacks it)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return cast("Callable[..., int]", fn)


_syncfs = _libc_function("syncfs", ctypes.c_int)
_sync_file_range = _libc_function(
    "sync_file_range", ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint
)
_SYNC_FILE_RANGE_WRITE = 2  # start writing the file's dirty pages back; do not wait

GROUP_FLUSH_MIN = 3
"""From this many files on, a batch is flushed together rather than with an fsync
each (measured: 4 files 0.6 ms against 1.1 ms, 100 files 5 ms against 23 ms)."""

OTHERS_DIRTY_MAX = 2 * 1024 * 1024
"""Bytes of dirty data besides the batch's own under which one syncfs flushes a batch.
syncfs writes back everything dirty on the filesystem: while another program writes
(a build, a download), it waits for that too. Measured with 32 MB of another
program's writes pending, 13 files: syncfs 43-60 ms, each file's writeback started
then fdatasync 1.3 ms; with nothing else pending, 0.6 against 1.3 ms."""


def _dirty_bytes() -> int | None:
    """Data waiting to be written back, system-wide (Linux: Dirty + Writeback of
    /proc/meminfo); None if unknown."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    total = 0
    for line in lines:
        if line.startswith((b"Dirty:", b"Writeback:")):
            fields = line.split()
            total += int(fields[1]) * 1024 if len(fields) > 1 and fields[1].isdigit() else 0
    return total


def syncfs_is_quick(dirty: int | None, ours: int) -> bool:
    """True if one syncfs flushes a batch of `ours` bytes quickly: little else is dirty."""
    return dirty is not None and dirty - ours <= OTHERS_DIRTY_MAX


class GroupFlush:
    """fsync for many threads at once (group commit, leader and followers).

    A thread that wants its file on disk queues the file's descriptor. If no flush is
    under way it leads: it takes the whole queue and flushes it together (see
    `_flush_fds`); threads arriving meanwhile wait and are flushed
    together by the next leader. One writer alone pays one fsync, as before; many
    writers share the disk's flushes instead of queueing one fsync each behind it.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[int] = []
        self._leading = False
        self._next = 0  # number of the batch the queue will become
        self._done = -1  # highest batch number flushed
        self._errors: dict[int, OSError] = {}
        self.requests = 0  # files asked for, and flushes made for them (to measure)
        self.batches = 0
        self.syncfs_trips = 0  # groups flushed by one syncfs, and file by file
        self.file_trips = 0

    def flush(self, *fds: int) -> None:
        """Return once the files of `fds` are on disk (raises the flush's OSError)."""
        with self._cond:
            self._queue.extend(fds)
            mine = self._next
            while self._done < mine and self._leading:
                self._cond.wait()
            if self._done >= mine:
                error = self._errors.get(mine)
                if error is not None:
                    raise error
                return
            self._leading = True
            batch, self._queue = self._queue, []
            self._next += 1
            self.requests += len(batch)
            self.batches += 1
        error = None
        try:
            syncfs_groups, file_groups = _flush_fds(batch)
            self.syncfs_trips += syncfs_groups  # only the leader writes these
            self.file_trips += file_groups
        except OSError as exc:
            error = exc
        finally:
            with self._cond:
                self._done = mine
                self._leading = False
                if error is not None:
                    self._errors[mine] = error
                for old in [n for n in self._errors if n < mine - 64]:
                    del self._errors[old]
                self._cond.notify_all()
        if error is not None:
            raise error


def _flush_fds(fds: Sequence[int]) -> tuple[int, int]:
    """Flush the files of `fds` to disk; how many groups went by one syncfs, and file by
    file.

    On Linux, three or more files on one filesystem are flushed together: with one
    syncfs(2) (one journal commit and one cache flush for all) while little else on
    the system waits to be written (`syncfs_is_quick`), else by starting each file's
    writeback and then an fdatasync each (the first commits the journal for all; the
    others find their data written). Elsewhere, and for one or two files, an fsync each.
    """
    if len(fds) < GROUP_FLUSH_MIN or _syncfs is None:
        for fd in fds:
            os.fsync(fd)
        return 0, 0
    by_device: dict[int, list[tuple[int, int]]] = {}
    for fd in fds:
        st = os.fstat(fd)
        by_device.setdefault(st.st_dev, []).append((fd, st.st_size))
    dirty: int | None = None
    syncfs_groups = file_groups = 0
    for group in by_device.values():
        if len(group) < GROUP_FLUSH_MIN:
            for fd, _ in group:
                os.fsync(fd)
            continue
        if dirty is None:
            dirty = _dirty_bytes()
        if syncfs_is_quick(dirty, sum(size for _, size in group)):
            _check(_syncfs(group[0][0]), "syncfs")
            syncfs_groups += 1
            continue
        if _sync_file_range is not None:
            for fd, _ in group:
                _check(_sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE), "sync_file_range")
        for fd, _ in group:
            os.fdatasync(fd)
        file_groups += 1
    return syncfs_groups, file_groups


def _check(result: int, call: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{call}: {os.strerror(err)}")


group_flush = GroupFlush()
"""The process's flusher: every durable write of the hive goes through it."""


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


# -- durable operations, written once and run two ways ---------------------------
#
# An operation that needs files on disk before it goes on (a message fsynced before
# it is linked into new/) is a generator: it yields each batch of files to flush and
# returns its result. `run` drives it here and now; `run_async` drives it on an event
# loop, doing the work between flushes inline (microseconds of syscalls) and only
# the flushes in a worker thread, where the flushes of concurrent operations share
# one trip to the disk (`GroupFlush`). With fsync off an operation yields nothing.

T = TypeVar("T")
Steps = Generator[list[Path], None, T]


def fsync_all(paths: Sequence[Path]) -> None:
    """Flush these files to disk, sharing the flush with other threads' (group commit:
    one trip for a batch, see `_flush_fds`)."""
    error = flush_many([paths])[0]
    if error is not None:
        raise error


def run(steps: Steps[T]) -> T:
    """Drive a durable operation to its end in this thread."""
    try:
        batch = next(steps)
        while True:
            try:
                fsync_all(batch)
            except OSError as exc:
                batch = steps.throw(exc)
                continue
            batch = steps.send(None)
    except StopIteration as stop:
        return cast("T", stop.value)


async def run_async(steps: Steps[T]) -> T:
    """Drive a durable operation on the event loop; its flushes wait in a worker thread,
    in one trip with every other flush asked for meanwhile on this loop (`LoopFlusher`)."""
    flusher = LoopFlusher.of(asyncio.get_running_loop())
    try:
        batch = next(steps)
        while True:
            try:
                await flusher.flush(batch)
            except OSError as exc:
                batch = steps.throw(exc)
                continue
            batch = steps.send(None)
    except StopIteration as stop:
        return cast("T", stop.value)


_Request = tuple[Sequence[Path], "asyncio.Future[None]"]


def flush_many(requests: Sequence[Sequence[Path]]) -> list[OSError | None]:
    """Flush the files of several requests at once (one trip, see `_flush_fds`) and say per
    request what went wrong, if anything: a file that cannot be opened fails only its
    own request; a failed flush fails them all."""
    fds: list[int] = []
    errors: list[OSError | None] = []
    try:
        for paths in requests:
            opened: list[int] = []
            try:
                for path in paths:
                    opened.append(os.open(path, os.O_RDONLY))
            except OSError as exc:
                for fd in opened:
                    os.close(fd)
                errors.append(exc)
                continue
            fds.extend(opened)
            errors.append(None)
        if fds:
            try:
                group_flush.flush(*fds)
            except OSError as exc:
                errors = [e or exc for e in errors]
    finally:
        for fd in fds:
            os.close(fd)
    return errors


INLINE_FLUSH_MAX = 0.001
"""Seconds a flush may take, on recent form, to be done on the event loop itself: a
hand-off to a worker thread costs the loop about as much (its turns for the
interpreter lock), and blocks nothing for longer. Slower disks get the thread."""
_FORM = 0.2  # weight of the latest flush in the running estimate


class LoopFlusher:
    """Group commit on an event loop: every flush asked for while one is under way (or
    in the same loop iteration) goes to the disk together, in one trip (see
    `_flush_fds`). Fifty agents finishing tasks at once cost a few trips, not fifty, and one
    agent's round of tool calls shares a single flush (see the cycle). A trip runs on
    the loop while flushes are quick (`INLINE_FLUSH_MAX`) and no other user could run
    meanwhile, else in a worker thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: list[_Request] = []
        self._busy = False
        self.trips = 0  # trips made, and requests served by them (to measure)
        self.requests = 0
        self.in_thread = 0  # trips made in a worker thread
        self.recent = 0.0  # seconds a flush takes, on recent form
        self.users = 0
        """Work in flight on this loop that flushes through it (the agents' cycles, see
        `using`): with more than one, a flush goes to a thread so the others run
        meanwhile, however quick the disk."""

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> LoopFlusher:
        """The flusher of `loop` (one per loop)."""
        flusher = _flushers.get(loop)
        if flusher is None:
            flusher = _flushers[loop] = cls(loop)
        return flusher

    async def flush(self, paths: Sequence[Path]) -> None:
        """Return once the files of `paths` are on disk (raises the flush's OSError)."""
        if paths:
            await self.request(paths)

    @contextlib.contextmanager
    def using(self) -> Iterator[None]:
        """Count a piece of work (an agent's cycle) among the flusher's `users`."""
        self.users += 1
        try:
            yield
        finally:
            self.users -= 1

    def request(self, paths: Sequence[Path], *, lazy: bool = False) -> asyncio.Future[None]:
        """A future done once the files of `paths` are on disk (or failed with the
        flush's OSError). A `lazy` request starts no trip of its own: it rides with
        the next one that starts (or with `kick`), for a file that must be on disk
        before other flushed files are used, but need not be sooner."""
        future: asyncio.Future[None] = self._loop.create_future()
        self._waiting.append((paths, future))
        if not lazy:
            self.kick()
        return future

    def kick(self) -> None:
        """Start a trip for whatever waits, unless one is under way (it takes them next)."""
        if self._waiting and not self._busy:
            self._busy = True
            # Start at the end of this loop iteration: coroutines ready now join in.
            self._loop.call_soon(self._start)

    def _start(self) -> None:
        batch, self._waiting = self._waiting, []
        if not batch:
            self._busy = False
            return
        self.trips += 1
        self.requests += len(batch)
        requests = [paths for paths, _ in batch]
        if self.recent <= INLINE_FLUSH_MAX and self.users <= 1:
            self._flush_here(batch, requests)
            return
        try:
            work = self._loop.run_in_executor(None, self._timed, requests)
        except RuntimeError:  # the loop's executor is shut down (a stop): flush here
            self._flush_here(batch, requests)
            return
        self.in_thread += 1
        work.add_done_callback(lambda done: self._finish(batch, done))

    def _flush_here(self, batch: list[_Request], requests: list[Sequence[Path]]) -> None:
        """Make the trip on the loop itself, then answer the batch."""
        done: asyncio.Future[list[OSError | None]] = self._loop.create_future()
        try:
            done.set_result(self._timed(requests))
        except Exception as exc:  # failed as a trip in a thread fails
            done.set_exception(exc)
        self._finish(batch, done)

    def _timed(self, requests: list[Sequence[Path]]) -> list[OSError | None]:
        """`flush_many`, its time noted in `recent` (a float store: safe from a thread)."""
        started = time.perf_counter()
        try:
            return flush_many(requests)
        finally:
            took = time.perf_counter() - started
            self.recent += _FORM * (took - self.recent)

    def _finish(self, batch: list[_Request], done: asyncio.Future[list[OSError | None]]) -> None:
        try:
            errors: list[OSError | None] = done.result()
        except BaseException as exc:  # the executor is gone (shutdown): fail the batch
            failure = exc if isinstance(exc, OSError) else OSError(f"flush not run: {exc!r}")
            errors = [failure] * len(batch)
        for (_, future), error in zip(batch, errors, strict=True):
            if future.done():  # its waiter was cancelled; the flush happened anyway
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)
        # Whatever arrived during the trip goes next, in one batch.
        self._start()


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
    if mode == KEEP_MODE:
        mode = _regular_file_mode(path)
    tmp = write_temp(path.parent, path.name, text.encode("utf-8"), fsync=False)
    try:
        if isinstance(mode, int):
            # Before the rename: no reader sees the new file without it. The permission
            # bits only: setuid and setgid, which an ordinary write clears, never outlive
            # a rewrite here (nor the sticky bit).
            os.chmod(tmp, mode & 0o777)
        if fsync:
            yield [tmp]
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(
    path: Path, text: str, *, fsync: bool = True, mode: int | Literal["keep"] | None = KEEP_MODE
) -> None:
    """Replace `path` with `text` in one step: readers see the old or the new file, with
    the old one's permission bits (see `atomic_write_steps`)."""
    run(atomic_write_steps(path, text, fsync=fsync, mode=mode))


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


_flushers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopFlusher] = (
    weakref.WeakKeyDictionary()
)
