"""LoopFlusher: the flushes asked for on one event loop share worker trips (group commit)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from hivemind.fs import flush, loopflusher
from hivemind.fs.atomic import atomic_write_steps
from hivemind.fs.loopflusher import LoopFlusher
from hivemind.fs.steps import run_async


def files(directory: Path, count: int, prefix: str = "f") -> list[Path]:
    """`count` small real files, written but not yet flushed."""
    paths = [directory / f"{prefix}{i}.md" for i in range(count)]
    for i, path in enumerate(paths):
        path.write_text(f"file {i}\n")
    return paths


def this_loops_flusher() -> LoopFlusher:
    return LoopFlusher.of(asyncio.get_running_loop())


async def test_concurrent_flushes_share_a_few_worker_trips(tmp_path: Path) -> None:
    flusher = this_loops_flusher()
    paths = files(tmp_path, 20)
    trips, requests = flusher.trips, flusher.requests

    results = await asyncio.gather(*(flusher.flush([p]) for p in paths))

    assert results == [None] * 20
    assert flusher.requests - requests == 20
    assert flusher.trips - trips < flusher.requests - requests
    assert flusher.trips - trips <= 3


async def test_a_lone_coroutine_makes_one_trip_per_flush(tmp_path: Path) -> None:
    flusher = this_loops_flusher()
    paths = files(tmp_path, 5)
    trips, requests = flusher.trips, flusher.requests

    for path in paths:
        await flusher.flush([path])

    assert (flusher.trips - trips, flusher.requests - requests) == (5, 5)


async def test_a_missing_file_fails_only_its_own_request(tmp_path: Path) -> None:
    flusher = this_loops_flusher()
    present = files(tmp_path, 4)
    missing = tmp_path / "gone.md"
    trips = flusher.trips

    results = await asyncio.gather(
        flusher.flush([present[0]]),
        flusher.flush([present[1], missing]),
        flusher.flush([present[2]]),
        flusher.flush([present[3]]),
        return_exceptions=True,
    )

    assert flusher.trips - trips == 1  # one batch: the failure did not split it
    assert isinstance(results[1], FileNotFoundError)
    assert "gone.md" in str(results[1])
    assert [results[0], results[2], results[3]] == [None, None, None]


async def test_a_cancelled_waiter_does_not_break_the_batch(tmp_path: Path) -> None:
    flusher = this_loops_flusher()
    paths = files(tmp_path, 5)
    trips = flusher.trips
    waiters = [asyncio.ensure_future(flusher.flush([p])) for p in paths]
    while flusher.trips == trips:  # until the trip has left for the worker thread
        await asyncio.sleep(0)

    waiters[2].cancel()
    others = await asyncio.wait_for(
        asyncio.gather(*(w for i, w in enumerate(waiters) if i != 2)), timeout=5
    )

    assert waiters[2].cancelled()
    assert others == [None] * 4


async def test_the_flusher_still_works_after_a_cancelled_waiter(tmp_path: Path) -> None:
    flusher = this_loops_flusher()
    first, later = files(tmp_path, 2)
    trips = flusher.trips
    waiter = asyncio.ensure_future(flusher.flush([first]))
    while flusher.trips == trips:
        await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)

    await asyncio.wait_for(flusher.flush([later]), timeout=5)  # not stuck busy

    assert flusher.trips - trips == 2


async def test_flushing_no_files_returns_without_a_trip() -> None:
    flusher = this_loops_flusher()
    trips, requests = flusher.trips, flusher.requests

    await flusher.flush([])

    assert (flusher.trips, flusher.requests) == (trips, requests)


def test_each_event_loop_has_its_own_flusher() -> None:
    async def flusher_pair() -> tuple[LoopFlusher, LoopFlusher]:
        loop = asyncio.get_running_loop()
        return LoopFlusher.of(loop), LoopFlusher.of(loop)

    first, again = asyncio.run(flusher_pair())
    other, _ = asyncio.run(flusher_pair())

    assert first is again
    assert other is not first


async def test_concurrent_atomic_writes_are_whole_and_share_trips(tmp_path: Path) -> None:
    flusher = this_loops_flusher()
    texts = {tmp_path / f"note{i}.md": f"note {i}\n" * (i + 1) for i in range(12)}
    trips = flusher.trips

    await asyncio.gather(*(run_async(atomic_write_steps(p, t)) for p, t in texts.items()))

    assert {p: p.read_text() for p in texts} == texts
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert flusher.trips - trips < len(texts)


@pytest.mark.parametrize("count", [1, 3, 8], ids=["one-file", "three-files", "eight-files"])
async def test_one_request_for_many_files_is_one_trip(tmp_path: Path, count: int) -> None:
    flusher = this_loops_flusher()
    paths = files(tmp_path, count)
    trips, requests = flusher.trips, flusher.requests

    await flusher.flush(paths)

    assert (flusher.trips - trips, flusher.requests - requests) == (1, 1)


async def test_a_lazy_request_waits_for_the_next_trip_and_shares_it(tmp_path: Path) -> None:
    flusher = this_loops_flusher()
    lazy_file, eager_file = files(tmp_path, 2)
    trips = flusher.trips

    lazy = flusher.request([lazy_file], lazy=True)
    await asyncio.sleep(0.05)
    assert not lazy.done() and flusher.trips == trips  # it started no trip of its own

    await flusher.flush([eager_file])
    await asyncio.wait_for(lazy, 5.0)
    assert flusher.trips - trips == 1  # both went in the eager request's trip


async def test_kick_sends_lazy_requests_when_nobody_else_flushes(tmp_path: Path) -> None:
    flusher = this_loops_flusher()
    (lazy_file,) = files(tmp_path, 1)
    trips = flusher.trips

    lazy = flusher.request([lazy_file], lazy=True)
    flusher.kick()
    await asyncio.wait_for(lazy, 5.0)
    assert flusher.trips - trips == 1
    flusher.kick()  # nothing waits: no empty trip
    await asyncio.sleep(0.05)
    assert flusher.trips - trips == 1


async def test_quick_flushes_run_on_the_loop_and_slow_ones_in_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    flusher = LoopFlusher(loop)  # its own, with no history
    paths = files(tmp_path, 6)
    delay = [0.0]

    def disk(requests: Sequence[Sequence[Path]]) -> list[OSError | None]:
        # A disk that takes exactly this long now (the real one's pace varies too
        # much here to tell quick from slow in a test).
        time.sleep(delay[0])
        return [None] * len(requests)

    monkeypatch.setattr(flush, "flush_many", disk)
    await flusher.flush([paths[0]])
    assert (flusher.trips, flusher.in_thread) == (1, 0)  # quick: done on the loop

    delay[0] = 0.2  # slow enough for the ticker to beat meanwhile on a busy machine
    await flusher.flush([paths[1]])  # found slow only now: still on the loop
    assert flusher.recent > loopflusher.INLINE_FLUSH_MAX
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    beat = asyncio.create_task(ticker())
    await flusher.flush([paths[2]])  # slow: in a thread, the loop runs meanwhile
    beat.cancel()
    assert flusher.in_thread == 1 and ticks >= 3

    delay[0] = 0.0
    for path in paths[3:] * 100:  # quick again: back on the loop once the form shows it
        await flusher.flush([path])  # (a busy machine may make a few of them slow)
        if flusher.recent <= loopflusher.INLINE_FLUSH_MAX:
            break
    assert flusher.recent <= loopflusher.INLINE_FLUSH_MAX
    threaded = flusher.in_thread
    await flusher.flush([paths[3]])
    assert flusher.in_thread == threaded


async def test_with_other_work_in_flight_even_a_quick_flush_goes_to_a_thread(
    tmp_path: Path,
) -> None:
    flusher = LoopFlusher(asyncio.get_running_loop())
    first, second = files(tmp_path, 2)
    with flusher.using():
        await flusher.flush([first])
        assert flusher.in_thread == 0  # alone: on the loop
        with flusher.using():  # a second cycle in flight: it may run meanwhile
            await flusher.flush([second])
            assert flusher.in_thread == 1
    assert flusher.users == 0


async def test_a_flush_asked_for_once_the_executor_is_shut_down_is_made_on_the_loop(
    tmp_path: Path,
) -> None:
    """A stop with no grace period: the loop's default executor is shut down while a
    cycle still flushes. The trip is made on the loop (it raised "Executor shutdown has
    been called" in a loop callback, and the flush never answered)."""
    loop = asyncio.get_running_loop()
    await loop.shutdown_default_executor()
    flusher = LoopFlusher(loop)
    first, second = files(tmp_path, 2)
    with flusher.using(), flusher.using():  # two cycles in flight: a thread would be asked
        await asyncio.wait_for(flusher.flush([first, second]), 5)
    assert flusher.trips == 1 and flusher.in_thread == 0
