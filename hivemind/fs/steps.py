"""Durable operations written once and run two ways: here and now, or on an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from pathlib import Path
from typing import TypeVar, cast

from hivemind.fs.flush import fsync_all
from hivemind.fs.loopflusher import LoopFlusher

# An operation that needs files on disk before it goes on (a message fsynced before
# it is linked into new/) is a generator: it yields each batch of files to flush and
# returns its result. `run` drives it here and now; `run_async` drives it on an event
# loop, doing the work between flushes inline (microseconds of syscalls) and only
# the flushes in a worker thread, where the flushes of concurrent operations share
# one trip to the disk (`GroupFlush`). With fsync off an operation yields nothing.

T = TypeVar("T")
Steps = Generator[list[Path], None, T]


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
