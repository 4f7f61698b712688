"""The hive file protocol: claims/s, deliveries/s, file-to-event latency.

Claims: tasks claimed per second (atomic rename + front matter rewrite, fsynced),
by one process and by several racing for the same tasks. Deliveries: maildir
deliveries per second (tmp/ + fsync + link into new/), one writer, with a
directory fsync each, and several writers. Latency: from a task file's creation
to its HiveEvent on the asyncio queue (settle time included), inotify and polling.

This VM's disk pace swings several-fold with other load, so every row is shown
beside the pace of bare write(+fsync)+rename syscalls measured just before it.

    python bench/bench_hive.py            # 2 000 tasks/messages, 200 latency samples
    python bench/bench_hive.py --quick    # 500 tasks/messages, 60 latency samples
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind.fs.statcache import RACY_MARGIN
from hivemind.fs.steps import run_async
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox, PostOffice, new_message_id
from hivemind.hive.models import Message, Task
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.watcher import HiveWatcher

Row = tuple[str, str, str, str]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def new_hive(base: Path, name: str) -> Hive:
    return Hive(base / name).ensure()


def drop_tasks(hive: Hive, n: int) -> None:
    board = TaskBoard(hive, settle_time=0, fsync=False)  # setup, not measured
    for i in range(n):
        board.create(Task(id=f"t{i:05d}", title=f"Task {i}", body=f"# Task {i}\n\nDo {i}.\n"))
    # Tasks reach a claim settled; a file younger than this is re-read ("racy" stat cache).
    time.sleep(RACY_MARGIN)


# -- claims ----------------------------------------------------------------------


def bench_claims_single(base: Path, n: int) -> float:
    hive = new_hive(base, "claims1")
    drop_tasks(hive, n)
    board = TaskBoard(hive, settle_time=0)
    refs = board.scan_pending()
    os.sync()  # setup's dirty pages must not slow the measured part
    start = time.perf_counter()
    won = sum(board.claim(ref, "worker") is not None for ref in refs)
    elapsed = time.perf_counter() - start
    assert won == n, won
    return n / elapsed


def bench_claims_batched(base: Path, n: int, batch: int) -> float:
    """TaskBoard.claim_many: one look at done/ for a batch's dependencies."""
    hive = new_hive(base, f"claims-batch-{batch}")
    drop_tasks(hive, n)
    board = TaskBoard(hive, settle_time=0)
    refs = board.scan_pending()
    os.sync()  # setup's dirty pages must not slow the measured part
    start = time.perf_counter()
    won = 0
    for i in range(0, n, batch):
        won += sum(r is not None for r in board.claim_many([(r, "w") for r in refs[i : i + batch]]))
    elapsed = time.perf_counter() - start
    assert won == n, won
    return n / elapsed


def _racer(root: str, agent: str, ready: Any, out: Any) -> None:
    board = TaskBoard(Hive(root), settle_time=0)
    refs = board.scan_pending()
    ready.wait()  # everyone has scanned: the race starts now
    os.sync()  # setup's dirty pages must not slow the measured part
    start = time.perf_counter()
    won = sum(board.claim(ref, agent) is not None for ref in refs)
    out.put((won, start, time.perf_counter()))


def bench_claims_race(base: Path, n: int, workers: int) -> tuple[float, int]:
    """`workers` processes try to claim every task; returns claims/s and the total won."""
    hive = new_hive(base, f"claims{workers}")
    drop_tasks(hive, n)
    os.sync()
    ctx = mp.get_context("fork")
    ready, out = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(str(hive.root), f"w{i}", ready, out))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    start = min(r[1] for r in results)
    end = max(r[2] for r in results)
    total = sum(r[0] for r in results)
    return total / (end - start), total


def bench_raw_fsync(folder: Path, n: int, fsync: bool) -> float:
    """The disk's own pace: write + (fsync) + rename with bare syscalls, no hive code."""
    folder.mkdir()
    data = b"---\nid: x\n---\n# Task\n\nDo it.\n"
    os.sync()  # setup's dirty pages must not slow the measured part
    start = time.perf_counter()
    for i in range(n):
        tmp = folder / f".t{i}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
        os.close(fd)
        os.rename(tmp, folder / f"t{i}.md")
    return n / (time.perf_counter() - start)


# -- deliveries -------------------------------------------------------------------


def _messages(n: int, to: str) -> list[Message]:
    return [
        Message(id=new_message_id(), from_="bench", to=to, subject=f"m{i}", body=f"Hello {i}.\n")
        for i in range(n)
    ]


def bench_deliver(base: Path, n: int, *, fsync: bool = True) -> float:
    hive = new_hive(base, f"deliver-{fsync}")
    box = Mailbox(hive, "bob", fsync=fsync).ensure()
    messages = _messages(n, "bob")
    os.sync()  # setup's dirty pages must not slow the measured part
    start = time.perf_counter()
    for m in messages:
        box.deliver(m)
    return n / (time.perf_counter() - start)


def bench_deliver_many(base: Path, n: int, batch: int) -> float:
    """Mailbox.deliver_many: a batch flushed together (one syncfs), then new/ once."""
    hive = new_hive(base, f"deliver-many-{batch}")
    box = Mailbox(hive, "bob").ensure()
    messages = _messages(n, "bob")
    os.sync()  # setup's dirty pages must not slow the measured part
    start = time.perf_counter()
    for i in range(0, n, batch):
        box.deliver_many(messages[i : i + batch])
    return n / (time.perf_counter() - start)


def bench_send_durable(base: Path, n: int) -> float:
    """PostOffice.send with sync_dirs: file fsync + directory fsync per message."""
    hive = new_hive(base, "send-durable")
    (hive.agent_dir("bob")).mkdir(parents=True)
    hive.rom_path("bob").write_text("bob\n")
    office = PostOffice(hive, sync_dirs=True)
    os.sync()  # setup's dirty pages must not slow the measured part
    start = time.perf_counter()
    for i in range(n):
        office.send("alice", "bob", f"m{i}", f"Hello {i}.\n")
    return n / (time.perf_counter() - start)


def bench_deliver_threads(base: Path, n: int, threads: int) -> float:
    """Several writers at once (agents of one daemon): fsyncs overlap in the journal."""
    hive = new_hive(base, f"deliver-t{threads}")
    boxes = [Mailbox(hive, f"box{i}").ensure() for i in range(threads)]
    batches = [_messages(n // threads, b.name) for b in boxes]

    def run(box: Mailbox, batch: list[Message]) -> None:
        for m in batch:
            box.deliver(m)

    workers = [threading.Thread(target=run, args=pair) for pair in zip(boxes, batches, strict=True)]
    os.sync()  # setup's dirty pages must not slow the measured part
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(len(b) for b in batches) / (time.perf_counter() - start)


def bench_deliver_async(base: Path, n: int, senders: int) -> float:
    """As the daemon delivers: `senders` coroutines on one event loop, each message's
    file work inline and its flush in a worker thread, shared with the others'."""
    hive = new_hive(base, f"deliver-async-{senders}")
    for name in ("alice", "bob"):
        hive.agent_dir(name).mkdir(parents=True)
        hive.rom_path(name).write_text(f"{name}\n")
    post = PostOffice(hive)
    post.mailbox("bob").ensure()

    async def sender(k: int) -> None:
        for i in range(n // senders):
            await run_async(post.send_steps("alice", "bob", f"m{k}-{i}", f"Hello {i}.\n"))

    async def main() -> float:
        start = time.perf_counter()
        await asyncio.gather(*(sender(k) for k in range(senders)))
        return (n // senders * senders) / (time.perf_counter() - start)

    os.sync()  # setup's dirty pages must not slow the measured part
    return asyncio.run(main())


# -- event latency ------------------------------------------------------------------


async def _latency(hive: Hive, samples: int, gap: float, **watcher_args: Any) -> list[float]:
    created: dict[Path, float] = {}
    got: dict[Path, float] = {}
    async with HiveWatcher(hive, rescan_interval=60, **watcher_args) as watcher:

        def produce() -> None:
            for i in range(samples):
                path = hive.tasks_dir / f"lat{i:04d}.md"
                with path.open("w") as f:  # an editor-like write, not an atomic rename
                    f.write(f"# Task {i}\n\nbody\n")
                created[path] = time.perf_counter()
                time.sleep(gap)

        producer = asyncio.create_task(asyncio.to_thread(produce))
        deadline = time.perf_counter() + samples * gap + 10
        while len(got) < samples and time.perf_counter() < deadline:
            event = await watcher.next(timeout=1.0)
            if event is not None and event.path not in got:
                got[event.path] = time.perf_counter()
        await producer
    return [(got[p] - created[p]) * 1000 for p in got if p in created]


def bench_latency(base: Path, samples: int, *, poll: bool) -> list[float]:
    hive = new_hive(base, f"latency-{'poll' if poll else 'inotify'}")
    gap = 0.02 if not poll else 0.05
    kwargs: dict[str, Any] = {"settle_time": 0.05, "poll": poll}
    if poll:
        kwargs["poll_interval"] = 0.25
    return asyncio.run(_latency(hive, samples, gap, **kwargs))


# -- main ---------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 items, 60 latency samples")
    args = parser.parse_args()
    n = 500 if args.quick else 2000
    samples = 60 if args.quick else 200
    rows: list[Row] = []

    with tempfile.TemporaryDirectory(prefix="bench-hive-") as tmp:
        base = Path(tmp)
        runs = iter(range(1_000_000))

        def measure(label: str, fn: Callable[[], float], fsync: bool, check: str = "") -> float:
            # This VM's disk slows down as dirty pages pile up: start every measure from a
            # synced disk, and put the bare-syscall pace measured just before beside it.
            os.sync()
            disk = bench_raw_fsync(base / f"raw{next(runs)}", max(n // 4, 100), fsync)
            os.sync()
            value = fn()
            rows.append((label, f"{value:,.0f}/s", f"{disk:,.0f}/s ({value / disk:.0%})", check))
            return value

        measure("claims, 1 process", lambda: bench_claims_single(base, n), False, "≥ 2 000")
        measure(
            "claims, claim_many batches of 100", lambda: bench_claims_batched(base, n, 100), False
        )
        for workers in (4, 8):
            won: list[int] = []

            def race(workers: int = workers, won: list[int] = won) -> float:
                value, total = bench_claims_race(base, n, workers)
                won.append(total)
                return value

            measure(f"claims, {workers} processes racing", race, False)
            rows[-1] = (*rows[-1][:3], "each claimed once" if won == [n] else f"WON {won} of {n}!")
        measure("deliveries, 1 writer, a flush each", lambda: bench_deliver(base, n), True)
        measure(
            "deliveries, deliver_many batches of 100",
            lambda: bench_deliver_many(base, n, 100),
            True,
            "≥ 2 000",
        )
        for threads in (4, 8):
            measure(
                f"deliveries, {threads} writer threads (shared flushes)",
                lambda threads=threads: bench_deliver_threads(base, n, threads),
                True,
                "≥ 2 000",
            )
        measure(
            "deliveries, 8 senders on one event loop (as the daemon)",
            lambda: bench_deliver_async(base, n, 8),
            True,
            "≥ 2 000",
        )
        measure(
            "deliveries, 1 writer (+ dir fsync each)",
            lambda: bench_send_durable(base, n // 2),
            True,
        )
        measure(
            "deliveries, 1 writer (no fsync)", lambda: bench_deliver(base, n, fsync=False), False
        )
        for poll in (False, True):
            os.sync()
            lat = bench_latency(base, samples, poll=poll)
            mode = "polling 0.25 s" if poll else "inotify"
            rows.append(
                (
                    f"file → event, {mode} (settle 50 ms)",
                    f"p50 {pct(lat, 0.5):.1f} ms, p99 {pct(lat, 0.99):.1f} ms (n={len(lat)})",
                    "",
                    "" if poll else "p99 ≤ 100 ms",
                )
            )
    load = os.getloadavg()[0]
    table = Table(
        title=f"hive protocol ({'quick' if args.quick else 'full'}, {os.cpu_count()} CPUs, "
        f"load {load:.1f})"
    )
    table.add_column("measure")
    table.add_column("result", justify="right")
    table.add_column("bare syscalls just before", justify="right")
    table.add_column("target / check")
    for row in rows:
        table.add_row(*row)
    Console(width=130).print(table)


if __name__ == "__main__":
    main()
