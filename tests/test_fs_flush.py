"""Durable writes: many threads share flushes (group commit); a failed flush is raised."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from hivemind.fs import flush
from hivemind.fs.atomic import atomic_write_steps, create_new_steps, write_temp
from hivemind.fs.flush import GroupFlush, fsync_all
from hivemind.fs.steps import run, run_async


def test_one_writer_alone_flushes_each_file_itself(tmp_path: Path) -> None:
    flusher = GroupFlush()
    for i in range(5):
        fd = os.open(tmp_path / f"f{i}", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"x")
        flusher.flush(fd)
        os.close(fd)
    assert (flusher.requests, flusher.batches) == (5, 5)


def test_concurrent_writers_share_flushes(tmp_path: Path) -> None:
    flusher = GroupFlush()
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            start.wait()
            for i in range(40):
                fd = os.open(tmp_path / f"w{n}-{i}", os.O_WRONLY | os.O_CREAT, 0o644)
                os.write(fd, b"data\n" * 100)
                flusher.flush(fd)
                os.close(fd)
        except BaseException as exc:  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert flusher.requests == 320
    assert flusher.batches < flusher.requests  # writers arriving together rode one flush
    assert len(list(tmp_path.iterdir())) == 320


def test_a_failed_flush_is_raised_to_the_writer(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    with pytest.raises(OSError):
        GroupFlush().flush(fd)  # a closed descriptor: EBADF


def test_fsync_all_flushes_a_batch_and_names_a_missing_file(tmp_path: Path) -> None:
    paths = [write_temp(tmp_path, f"m{i}.md", b"hello\n", fsync=False) for i in range(6)]
    fsync_all(paths)  # one syncfs on Linux, an fsync each elsewhere
    assert all(p.read_bytes() == b"hello\n" for p in paths)
    with pytest.raises(FileNotFoundError) as info:
        fsync_all([*paths, tmp_path / "gone.md"])
    assert "gone.md" in str(info.value)


def test_a_durable_operation_yields_its_files_before_making_them_visible(tmp_path: Path) -> None:
    target = tmp_path / "note.md"
    steps = atomic_write_steps(target, "hello\n")
    [tmp] = next(steps)  # written, not yet flushed: not in place either
    assert tmp.read_text() == "hello\n" and not target.exists()
    with pytest.raises(StopIteration):
        steps.send(None)
    assert target.read_text() == "hello\n" and not tmp.exists()


def test_a_failed_flush_leaves_no_temp_file_and_no_target(tmp_path: Path) -> None:
    target = tmp_path / "note.md"
    steps = atomic_write_steps(target, "hello\n")
    [tmp] = next(steps)
    with pytest.raises(OSError, match="disk on fire"):
        steps.throw(OSError(5, "disk on fire"))
    assert not tmp.exists() and not target.exists()


def test_with_fsync_off_nothing_is_yielded(tmp_path: Path) -> None:
    assert run(atomic_write_steps(tmp_path / "a.md", "x", fsync=False)) is None
    assert (tmp_path / "a.md").read_text() == "x"


async def test_run_async_flushes_off_the_loop_and_finishes_the_operation(tmp_path: Path) -> None:
    results = await asyncio.gather(
        *(run_async(create_new_steps(tmp_path / f"m{i}.md", f"{i}\n")) for i in range(8)),
        run_async(create_new_steps(tmp_path / "m0.md", "again\n")),
    )
    assert results.count(True) == 8 and results.count(False) == 1
    assert (tmp_path / "m0.md").read_text() in {"0\n", "again\n"}  # one whole file, never both
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# -- a batch: one syncfs while little else waits to be written, else file by file --------

MB = 1024 * 1024
linux_only = pytest.mark.skipif(flush._syncfs is None, reason="syncfs is Linux's")


@pytest.mark.parametrize(
    ("dirty", "ours", "quick"),
    [(None, 0, False), (0, 0, True), (5 * MB, 4 * MB, True),
     (flush.OTHERS_DIRTY_MAX, 0, True), (flush.OTHERS_DIRTY_MAX + 1, 0, False),
     (64 * MB, 1 * MB, False)],
    ids=["unknown", "nothing", "mostly-ours", "at-the-limit", "past-the-limit", "busy"],
)
def test_a_syncfs_is_quick_only_when_little_besides_the_batch_is_dirty(
    dirty: int | None, ours: int, quick: bool
) -> None:
    assert flush.syncfs_is_quick(dirty, ours) is quick


def batch(tmp_path: Path, name: str, n: int = 5) -> list[Path]:
    paths = [tmp_path / f"{name}{i}" for i in range(n)]
    for path in paths:
        path.write_bytes(b"x" * 600)
    return paths


@linux_only
def test_with_another_writers_data_pending_a_batch_is_flushed_file_by_file(
    tmp_path: Path,
) -> None:
    """syncfs would wait for all of it: another program's 64 MB here."""
    (tmp_path / "someone-elses.bin").write_bytes(os.urandom(MB) * 64)  # dirty, not synced
    before = (flush.group_flush.syncfs_trips, flush.group_flush.file_trips)

    fsync_all(batch(tmp_path, "mine"))

    after = (flush.group_flush.syncfs_trips, flush.group_flush.file_trips)
    assert after == (before[0], before[1] + 1)


@linux_only
def test_with_little_else_pending_a_batch_is_one_syncfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flush, "_dirty_bytes", lambda: 0)  # a quiet machine
    before = (flush.group_flush.syncfs_trips, flush.group_flush.file_trips)

    fsync_all(batch(tmp_path, "mine"))

    after = (flush.group_flush.syncfs_trips, flush.group_flush.file_trips)
    assert after == (before[0] + 1, before[1])


@linux_only
def test_the_systems_dirty_data_is_read_from_proc_meminfo(tmp_path: Path) -> None:
    os.sync()
    quiet = flush._dirty_bytes()
    (tmp_path / "pending.bin").write_bytes(os.urandom(MB) * 16)
    busy = flush._dirty_bytes()
    assert quiet is not None and busy is not None
    assert busy >= 8 * MB  # most of the 16 MB just written waits to be written back
