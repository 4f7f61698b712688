"""HiveWatcher: settled, coalesced events; a rescan that catches what the OS missed."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from hivemind.fs import inotify
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.rom import RomRegistry
from hivemind.hive.watcher import HiveEvent, HiveEventKind, HiveWatcher
from hivemind.settings import AgentSettings

Kind = HiveEventKind

# watchdog's benign double-registration race on folders created in a burst (see watcher.py).
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id .* already exists for watch")


@pytest.fixture(autouse=True, params=["loop-inotify", "watchdog-threads"])
def os_events(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test twice: inotify read on the event loop (Linux), and watchdog's
    observer threads (what other systems use)."""
    if request.param == "loop-inotify" and not inotify.available():
        pytest.skip("inotify is Linux's")
    monkeypatch.setattr(HiveWatcher, "loop_inotify", request.param == "loop-inotify")
    return str(request.param)


def add_agent(hive: Hive, name: str, text: str = "# agent\n") -> Path:
    hive.agent_dir(name).mkdir(parents=True, exist_ok=True)
    rom = hive.rom_path(name)
    rom.write_text(text)
    return rom


async def expect(watcher: HiveWatcher, timeout: float = 3.0) -> HiveEvent:
    event = await watcher.next(timeout)
    assert event is not None, "no event arrived"
    return event


async def nothing_more(watcher: HiveWatcher, wait: float = 0.3) -> None:
    event = await watcher.next(wait)
    assert event is None, f"unexpected {event}"


async def test_dropped_task_gives_one_event(hive: Hive) -> None:
    async with HiveWatcher(hive, settle_time=0.05) as w:
        path = hive.tasks_dir / "job.md"
        path.write_text("# Job\n")
        assert await expect(w) == HiveEvent(Kind.TASK_DROPPED, path, None)
        await nothing_more(w)


async def test_files_present_at_start_are_not_events(hive: Hive) -> None:
    (hive.tasks_dir / "old.md").write_text("# Old\n")
    add_agent(hive, "ann")
    async with HiveWatcher(hive, settle_time=0.02) as w:
        await nothing_more(w)


async def test_rom_edit_gives_an_event_and_a_new_config(hive: Hive) -> None:
    rom = add_agent(hive, "ann", "---\nrole: Writer\n---\nWrite.\n")
    roms = RomRegistry(hive, AgentSettings())
    assert roms.load("ann").role == "Writer"
    async with HiveWatcher(hive, settle_time=0.05) as w:
        rom.write_text("---\nrole: Editor\n---\nEdit.\n")
        assert await expect(w) == HiveEvent(Kind.ROM_CHANGED, rom, "ann")
    assert roms.load("ann").role == "Editor"


async def test_agents_added_and_removed(hive: Hive) -> None:
    async with HiveWatcher(hive, settle_time=0.02) as w:
        rom = add_agent(hive, "bob")
        assert await expect(w) == HiveEvent(Kind.AGENT_ADDED, rom, "bob")
        rom.unlink()
        hive.agent_dir("bob").rmdir()
        assert await expect(w) == HiveEvent(Kind.AGENT_REMOVED, rom, "bob")


async def test_mail_knowledge_and_watched_files(hive: Hive) -> None:
    add_agent(hive, "ann")
    add_agent(hive, "bob")
    (hive.workspace_dir / "src").mkdir()
    async with HiveWatcher(hive, settle_time=0.02, watch_globs=["workspace/src/*.py"]) as w:
        await asyncio.to_thread(PostOffice(hive).send, "ann", "bob", "Hi", "hello")
        event = await expect(w)
        assert (event.kind, event.agent) == (Kind.MAIL_ARRIVED, "bob")
        note = hive.knowledge_dir / "style.md"
        note.write_text("# Style\n")
        assert await expect(w) == HiveEvent(Kind.KNOWLEDGE_CHANGED, note)
        code = hive.workspace_dir / "src" / "app.py"
        code.write_text("print('hi')\n")
        assert await expect(w) == HiveEvent(Kind.FILE_CHANGED, code)
        (hive.workspace_dir / "other.py").write_text("x = 1\n")
        await nothing_more(w)


@pytest.mark.parametrize("name", [".job.md.swp", "job.md~", ".#job.md", "job.tmp", "notes.txt"])
async def test_editor_temp_names_give_no_event(hive: Hive, name: str) -> None:
    async with HiveWatcher(hive, settle_time=0.02) as w:
        (hive.tasks_dir / name).write_text("partial")
        await nothing_more(w)


async def test_a_file_still_being_written_is_handed_on_once_stable(hive: Hive) -> None:
    async with HiveWatcher(hive, settle_time=0.2) as w:
        path = hive.tasks_dir / "slow.md"
        with path.open("w") as f:
            for part in ("---\n", "title: Slow\n", "---\n", "body\n"):
                f.write(part)
                f.flush()
                await asyncio.sleep(0.1)  # shorter than settle_time: still being written
        finished = time.monotonic()
        event = await expect(w)
        assert event.kind is Kind.TASK_DROPPED
        assert time.monotonic() - finished >= 0.15
        await nothing_more(w)


async def test_an_unchanged_file_reported_again_is_coalesced(hive: Hive) -> None:
    async with HiveWatcher(hive, settle_time=0.02) as w:
        path = hive.tasks_dir / "job.md"
        path.write_text("# Job\n")
        await expect(w)
        with path.open("a"):
            pass  # opened for writing and closed: an OS event, but no change
        await nothing_more(w)


async def test_the_rescan_finds_a_file_whose_os_event_never_came(hive: Hive) -> None:
    async with HiveWatcher(hive, settle_time=0.02, rescan_interval=0.1, os_events=False) as w:
        path = hive.tasks_dir / "quiet.md"
        path.write_text("# Arrived without an event\n")
        assert await expect(w) == HiveEvent(Kind.TASK_DROPPED, path, None)
        rom = add_agent(hive, "late")
        assert await expect(w) == HiveEvent(Kind.AGENT_ADDED, rom, "late")


async def test_polling_observer_sees_changes(hive: Hive) -> None:
    async with HiveWatcher(hive, settle_time=0.02, poll=True, poll_interval=0.1) as w:
        path = hive.tasks_dir / "polled.md"
        path.write_text("# Polled\n")
        assert await expect(w) == HiveEvent(Kind.TASK_DROPPED, path, None)


async def test_stops_cleanly_and_cannot_be_reopened(hive: Hive) -> None:
    before = set(threading.enumerate())
    watcher = HiveWatcher(hive, settle_time=0.02)
    async with watcher:
        (hive.tasks_dir / "a.md").write_text("# A\n")
        await expect(watcher)
    leftover = [t for t in set(threading.enumerate()) - before if "hive-fsync" not in t.name]
    assert not [t for t in leftover if t.is_alive() and "asyncio" not in t.name]
    with pytest.raises(RuntimeError, match="cannot be reopened"):
        async with watcher:
            pass


async def test_only_agents_new_mail_is_watched(hive: Hive) -> None:
    add_agent(hive, "bob")
    post = PostOffice(hive)
    post.mailbox("bob").ensure()
    async with HiveWatcher(hive, settle_time=0.02) as w:
        watched = {str(f.relative_to(hive.root)) for f, _ in w._watched_folders()}
        assert "mailboxes/bob/new" in watched
        assert not any(f.startswith(("mailboxes/human", "mailboxes/bob/tmp")) for f in watched)
        await asyncio.to_thread(post.send, "bob", "human", "Done", "all done")
        await nothing_more(w)  # people's mail wakes no agent
        await asyncio.to_thread(post.send, "human", "bob", "Hi", "hello")
        event = await expect(w)
        assert (event.kind, event.agent) == (Kind.MAIL_ARRIVED, "bob")


def queued(w: HiveWatcher) -> list[Path]:
    """Paths the handler queued for the loop (each with what its event said of its writer)."""
    return [path for path, _ in w._source.inbox]


async def test_a_task_leaving_tasks_wakes_nothing_and_is_tidied_with_the_next_news(
    hive: Hive,
) -> None:
    async with HiveWatcher(hive, settle_time=0.02, rescan_interval=60) as w:
        wakes: list[int] = []
        take = w._source.on_batch

        def counted() -> None:
            wakes.append(len(w._source.inbox))
            take()

        w._source.on_batch = counted
        job = hive.tasks_dir / "job.md"
        job.write_text("# Job\n")
        assert await expect(w) == HiveEvent(Kind.TASK_DROPPED, job, None)
        wakes.clear()
        job.rename(hive.root / "claimed.md")  # what a claim does: the file leaves tasks/
        for _ in range(300):  # the OS event reaches the observer thread
            if job in queued(w):
                break
            await asyncio.sleep(0.01)
        assert job in queued(w)
        await nothing_more(w, 0.2)
        assert wakes == [] and job in queued(w)  # no loop wake-up for it
        # The next news takes it along, in order: the same name dropped again is news.
        job.write_text("# Job, again\n")
        assert await expect(w) == HiveEvent(Kind.TASK_DROPPED, job, None)
        assert wakes and w._source.inbox == []
        await nothing_more(w)


async def test_a_task_that_left_is_forgotten_by_the_rescan_without_other_news(
    hive: Hive,
) -> None:
    async with HiveWatcher(hive, settle_time=0.02, rescan_interval=0.2) as w:
        job = hive.tasks_dir / "job.md"
        job.write_text("# Job\n")
        await expect(w)
        assert job in w._known
        job.unlink()
        for _ in range(300):
            if job not in w._known:
                break
            await asyncio.sleep(0.01)
        assert job not in w._known and w._source.inbox == []
        await nothing_more(w)


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
async def test_closing_ends_even_when_a_rescan_kick_comes_at_that_instant(
    hive: Hive, turns: int
) -> None:
    """Python 3.11's wait_for swallowed the cancel of the rescan loop when its kick
    came in the same instant: the loop went on for ever, and so did the daemon's stop
    (a clean-clone CI run hung so)."""
    watcher = HiveWatcher(hive, settle_time=0.0, rescan_interval=60)
    await watcher.__aenter__()
    await asyncio.sleep(0.01)
    watcher._kick.set()
    for _ in range(turns):
        await asyncio.sleep(0)

    await asyncio.wait_for(watcher.aclose(), 5)
