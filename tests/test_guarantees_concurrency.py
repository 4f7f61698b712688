"""One daemon per hive, stale locks, and people editing files while agents run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.settings import AgentSettings
from tests.helpers import CountingProvider, fast_config, write_agent, write_task


def env_without_key() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}


def start(hive: Hive, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "hivemind", "run", str(hive.root), "--quiet", "--offline", *args],
        env=env_without_key(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def wait_running(hive: Hive, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            status = json.loads(hive.status_file.read_text())
            if status.get("pid") == proc.pid and status.get("running"):
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError("the daemon did not start")


@pytest.mark.slow
def test_a_second_daemon_refuses_and_names_the_first_ones_pid(hive: Hive) -> None:
    write_agent(hive, "worker")
    first = start(hive)
    try:
        wait_running(hive, first)
        second = subprocess.run(
            [sys.executable, "-m", "hivemind", "run", str(hive.root), "--until-idle", "--offline"],
            check=False, env=env_without_key(), capture_output=True, timeout=60,
        )
        err = second.stderr.decode().strip()
        assert second.returncode == 1
        assert f"pid {first.pid}" in err and "already runs" in err
        assert "Traceback" not in err and err.count("\n") == 0
        assert first.poll() is None  # the first one is not disturbed
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert first.returncode == 0


@pytest.mark.slow
def test_the_lock_of_a_killed_daemon_is_taken_over(hive: Hive) -> None:
    write_agent(hive, "worker")
    first = start(hive)
    wait_running(hive, first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert hive.lock_file.read_text().strip() == str(first.pid)  # stale, left behind
    write_task(hive, "after-the-kill")

    second = start(hive, "--until-idle")
    _, err = second.communicate(timeout=60)

    assert second.returncode == 0, err.decode()
    assert (hive.done_dir / "after-the-kill.md").is_file()
    assert json.loads(hive.status_file.read_text())["pid"] == second.pid


def test_a_lock_file_naming_a_live_process_but_unlocked_is_taken_over(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    hive.lock_file.parent.mkdir(parents=True, exist_ok=True)
    hive.lock_file.write_text(f"{os.getppid()}\n")  # a pid that is alive, holding no lock

    daemon = Daemon(hive, fast_config(hive), CountingProvider(),
                    RunOptions(until_idle=True, idle_settle=0.2))
    assert asyncio.run(asyncio.wait_for(daemon.run(), 30)) == "idle"
    assert (hive.done_dir / "t1.md").is_file()


# -- people editing while agents run -----------------------------------------------------

ROM_A = "---\nrole: version A\n---\n" + "Instructions of version A. " * 400 + "END-OF-A\n"
ROM_B = "---\nrole: version B\n---\n" + "B is shorter. " * 100 + "END-OF-B\n"


def rewrite_in_place(path: Path, text: str) -> None:
    """As a careless editor saves: truncate, write in two pieces, with a pause between."""
    half = len(text) // 2
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text[:half])
        fh.flush()
        time.sleep(0.002)
        fh.write(text[half:])


def test_a_rom_rewritten_while_the_daemon_runs_is_never_half_read(hive: Hive) -> None:
    rom = write_agent(hive, "worker")
    rom.write_text(ROM_A)
    tasks = 300  # enough work that the editor rewrites the ROM many times meanwhile
    for i in range(tasks):
        write_task(hive, f"t{i:03d}")
    provider = CountingProvider()
    config = fast_config(hive)
    config.daemon.settle_time = 0.05  # the default: a file is read once it has settled
    daemon = Daemon(hive, config, provider, RunOptions(until_idle=True, idle_settle=0.3))
    stop = threading.Event()
    writes = 0

    def editor() -> None:
        nonlocal writes
        while not provider.requests and not stop.is_set():
            time.sleep(0.001)  # the daemon has read the ROM once: edits start now
        while not stop.is_set() and len(list(hive.done_dir.glob("*.md"))) < tasks:
            rewrite_in_place(rom, ROM_B if writes % 2 else ROM_A)
            writes += 1
            time.sleep(0.003)
        rom.write_text(ROM_A)

    thread = threading.Thread(target=editor)
    thread.start()
    try:
        asyncio.run(asyncio.wait_for(daemon.run(), 60))
    finally:
        stop.set()
        thread.join()

    assert writes > 50 and len(provider.requests) > 5
    for request in provider.requests:
        tail = request.system.rstrip()
        assert tail.endswith(("END-OF-A", "END-OF-B")), f"a half-read ROM: ...{tail[-80:]!r}"
        assert ("version A" in request.system) == tail.endswith("END-OF-A"), "a mixed ROM"
    assert len(list(hive.done_dir.glob("*.md"))) == tasks


def test_knowledge_edited_while_agents_run_ends_in_its_last_version(hive: Hive) -> None:
    write_agent(hive, "worker")
    note = hive.knowledge_dir / "facts.md"
    note.write_text("# Facts\n\nversion 0\n")
    provider = CountingProvider()
    daemon = Daemon(hive, fast_config(hive), provider, RunOptions())

    async def main() -> None:
        run = asyncio.create_task(daemon.run())
        for i in range(1, 31):
            rewrite_in_place(note, f"# Facts\n\nversion {i}\n" + "filler line\n" * (i * 20))
            write_task(hive, f"t{i:02d}")
            await asyncio.sleep(0.02)
        for _ in range(300):
            if len(list(hive.done_dir.glob("*.md"))) == 30:
                break
            await asyncio.sleep(0.05)
        write_task(hive, "last")
        for _ in range(300):
            if (hive.done_dir / "last.md").exists():
                break
            await asyncio.sleep(0.05)
        daemon.stop("test")
        await run

    asyncio.run(asyncio.wait_for(main(), 60))

    assert (hive.done_dir / "last.md").is_file()
    last = provider.requests[-1].context_json
    assert "version 30" in last and "filler line" in last
    assert note.read_text().startswith("# Facts\n\nversion 30\n")  # nobody rewrote it


def test_a_task_edited_before_the_claim_keeps_the_edit(hive: Hive) -> None:
    write_agent(hive, "worker", front="heartbeat: 0\n")
    path = write_task(hive, "t1", "first draft")
    path.write_text("# t1\n\nthe edited text\n")  # edited before it settled

    daemon = Daemon(hive, fast_config(hive), CountingProvider(),
                    RunOptions(until_idle=True, idle_settle=0.2))
    asyncio.run(asyncio.wait_for(daemon.run(), 30))

    done = (hive.done_dir / "t1.md").read_text()
    assert "the edited text" in done and "first draft" not in done


def test_a_rom_being_saved_keeps_the_last_good_config_until_it_settles(hive: Hive) -> None:
    rom = write_agent(hive, "worker")
    rom.write_text(ROM_A)
    past = time.time() - 10
    os.utime(rom, (past, past))
    registry = RomRegistry(hive, AgentSettings(), settle_time=0.5)
    assert registry.load("worker").role == "version A"

    rom.write_text(ROM_B[: len(ROM_B) // 2])  # half saved, just now
    assert registry.load("worker").role == "version A"
    assert registry.text("worker") == ROM_A

    rom.write_text(ROM_B)
    os.utime(rom, (past + 5, past + 5))  # saved and settled
    assert registry.load("worker").role == "version B"
    assert registry.text("worker") == ROM_B


def test_tasks_dropped_just_before_the_daemon_starts_are_done(hive: Hive) -> None:
    write_agent(hive, "worker")
    config = fast_config(hive)
    config.daemon.settle_time = 0.2  # still settling when the first scan comes
    for i in range(3):
        write_task(hive, f"t{i}")

    daemon = Daemon(hive, config, CountingProvider(), RunOptions(until_idle=True, idle_settle=0.2))
    reason = asyncio.run(asyncio.wait_for(daemon.run(), 30))

    assert reason == "idle"
    assert sorted(p.name for p in hive.done_dir.glob("*.md")) == ["t0.md", "t1.md", "t2.md"]
