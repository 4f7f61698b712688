"""Group commit on an event loop: the flushes asked for meanwhile go in one trip."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

from hivemind.fs import flush

_Request = tuple[Sequence[Path], "asyncio.Future[None]"]

INLINE_FLUSH_MAX = 0.001
"""Seconds a flush may take, on recent form, to be done on the event loop itself: a
hand-off to a worker thread costs the loop about as much (its turns for the
interpreter lock), and blocks nothing for longer. Slower disks get the thread."""
_FORM = 0.2  # weight of the latest flush in the running estimate


class LoopFlusher:
    """Group commit on an event loop: every flush asked for while one is under way (or
    in the same loop iteration) goes to the disk together, in one trip (see
    `flush.flush_many`). Fifty agents finishing tasks at once cost a few trips, not fifty,
    and one agent's round of tool calls shares a single flush (see the cycle). A trip runs on
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
        """`flush.flush_many`, its time noted in `recent` (a float store: safe from a thread)."""
        started = time.perf_counter()
        try:
            return flush.flush_many(requests)
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


_flushers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopFlusher] = (
    weakref.WeakKeyDictionary()
)
