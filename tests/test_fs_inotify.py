"""LoopInotify: inotify read on the event loop (Linux), behind the HiveWatcher."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from hivemind.fs import inotify
from hivemind.fs.inotify import IN_CREATE, IN_ISDIR, IN_Q_OVERFLOW, LoopInotify
from hivemind.hive.layout import Hive
from hivemind.hive.watcher import HiveEvent, HiveEventKind, HiveWatcher

pytestmark = pytest.mark.skipif(not inotify.available(), reason="inotify is Linux's")

Kind = HiveEventKind


async def expect(watcher: HiveWatcher, timeout: float = 3.0) -> HiveEvent:
    event = await watcher.next(timeout)
    assert event is not None, "no event arrived"
    return event


def watching_threads() -> list[str]:
    """Threads besides the loop's executor (the watcher's snapshot runs there)."""
    return [t.name for t in threading.enumerate()
            if t is not threading.main_thread() and not t.name.startswith("asyncio_")]


async def test_no_thread_is_started_to_watch(hive: Hive) -> None:
    before = watching_threads()
    async with HiveWatcher(hive, settle_time=0.02) as w:
        assert isinstance(w._source.observer, LoopInotify)
        path = hive.tasks_dir / "job.md"
        path.write_text("# Job\n")
        assert await expect(w) == HiveEvent(Kind.TASK_DROPPED, path, None)
        assert watching_threads() == before


async def test_a_folder_made_below_a_recursive_watch_is_watched(hive: Hive) -> None:
    async with HiveWatcher(hive, settle_time=0.02, rescan_interval=60) as w:
        deep = hive.knowledge_dir / "team" / "notes"
        deep.mkdir(parents=True)
        first = deep / "a.md"
        first.write_text("# Written at once, maybe before the watch\n")
        assert await expect(w) == HiveEvent(Kind.KNOWLEDGE_CHANGED, first, None)
        await asyncio.sleep(0.1)
        second = deep / "b.md"
        second.write_text("# Written later\n")
        assert await expect(w) == HiveEvent(Kind.KNOWLEDGE_CHANGED, second, None)


async def test_a_folder_moved_within_a_watch_reports_its_new_name(hive: Hive) -> None:
    old = hive.knowledge_dir / "drafts"
    old.mkdir()
    (old / "a.md").write_text("# A\n")
    async with HiveWatcher(hive, settle_time=0.02, rescan_interval=60) as w:
        new = hive.knowledge_dir / "final"
        old.rename(new)
        seen = set()
        while (event := await w.next(1.0)) is not None:
            seen.add(event.path)
        assert new / "a.md" in seen  # found under its new name
        later = new / "b.md"
        later.write_text("# B\n")
        assert await expect(w) == HiveEvent(Kind.KNOWLEDGE_CHANGED, later, None)


async def test_a_lost_queue_or_an_unknown_watch_asks_for_a_rescan_only(tmp_path: Path) -> None:
    lost: list[str] = []
    reader = LoopInotify(on_lost=lambda: lost.append("rescan"))
    try:
        reader._watch(str(tmp_path), False)
        (wd,) = reader._dirs
        name = b"x.md\0\0\0\0"
        data = (
            inotify._HEADER.pack(-1, IN_Q_OVERFLOW, 0, 0)
            + inotify._HEADER.pack(wd + 99, IN_CREATE, 0, len(name)) + name  # no such watch
            + inotify._HEADER.pack(wd, IN_CREATE, 0, len(name)) + name
            + inotify._HEADER.pack(wd, IN_CREATE | IN_ISDIR, 0, len(name)) + name
        )
        events = list(reader._events(data))
    finally:
        reader.stop()
    assert lost == ["rescan"]
    assert [(e.event_type, e.is_directory, e.src_path) for e in events] == [
        ("created", False, os.path.join(tmp_path, "x.md")),
        ("created", True, os.path.join(tmp_path, "x.md")),
    ]


async def test_stop_closes_the_descriptor_and_may_be_called_twice(tmp_path: Path) -> None:
    reader = LoopInotify(on_lost=lambda: None)
    reader.schedule(object(), str(tmp_path), recursive=True)
    reader.start()
    fd = reader._fd
    reader.stop()
    reader.stop()
    with pytest.raises(OSError):
        os.fstat(fd)
