"""Durable writes: many threads share flushes (group commit); a failed flush is raised."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from hivemind.hive.atomic import GroupFlush, fsync_all, write_temp


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
