"""The MCP pool when servers misbehave: they crash mid-call, hang, answer 5 MB, keep
crashing, or outlive a daemon killed with -9."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hivemind.mcp.api import ServerStatus
from hivemind.mcp.pool import McpPool
from hivemind.mcp.server import RestartPolicy
from hivemind.mcpspec import McpServerSpec
from tests.mcp_helpers import QUICK, alive, gone, notes_spec


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[McpPool]:
    pool = McpPool(tmp_path, {}, policy=QUICK)
    try:
        yield pool
    finally:
        await pool.aclose(grace=2.0)


async def pid_of(pool: McpPool) -> int:
    result = await pool.call("lead", "notes", "pid", {})
    assert not result.is_error, result.text
    return int(result.text)


async def test_a_server_that_exits_mid_call_errs_that_call_and_restarts(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    before = await pid_of(pool)
    crashed = await pool.call("lead", "notes", "crash", {})
    assert crashed.is_error
    assert crashed.text == ("the server `notes` exited (code 1) during the call: "
                            "notes: the index is corrupt")
    assert await pid_of(pool) != before  # the next call waits for the restart
    [state] = pool.states()
    assert (state.status, state.restarts) == (ServerStatus.READY, 1)
    assert state.error == "exited (code 1): notes: the index is corrupt"


async def test_a_call_past_its_timeout_is_an_error_and_a_live_server_stays(
        pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec(timeout=0.5)})
    before = await pid_of(pool)
    result = await pool.call("lead", "notes", "slow", {"seconds": 30})
    assert result.is_error and result.text == "`notes.slow` timed out after 0.5 s"
    assert await pid_of(pool) == before


async def test_a_stuck_server_is_restarted_after_a_timeout(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec(timeout=1)})
    before = await pid_of(pool)
    result = await pool.call("lead", "notes", "stall", {})
    assert result.is_error and "timed out after 1 s" in result.text
    assert "restarted" in result.text
    assert await gone(before)
    after = await pool.call("lead", "notes", "lookup", {"q": "bees"})
    assert after.text == "note about bees"


async def test_a_5_mb_result_is_cut_to_the_cap(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    result = await pool.call("lead", "notes", "big", {"n": 5_000_000}, max_chars=20_000)
    assert not result.is_error and result.cut == 4_980_000
    assert result.text.startswith("x" * 20_000)
    assert result.text.endswith("[... 4980000 more characters cut]")
    assert len(result.text) < 20_100


async def test_a_server_that_keeps_crashing_is_failed_and_its_tools_withdrawn(
        pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec(env={"NOTES_CRASH_AT_START": "1"})})
    [state] = pool.states()
    assert state.status == ServerStatus.FAILED
    assert state.restarts == QUICK.crashes - 1
    assert state.error is not None
    assert state.error.startswith("exited (code 3) while starting: notes: cannot open")
    assert pool.tools_for("lead") == []
    result = await pool.call("lead", "notes", "lookup", {"q": "x"})
    assert result.is_error and result.text.startswith("the server `notes` has failed: ")
    assert "tried again at" in result.text and "or when its settings change" in result.text


DAEMON = """
import asyncio, sys
from pathlib import Path
from hivemind.mcp.pool import McpPool
from hivemind.mcpspec import McpServerSpec

async def main():
    pool = McpPool(Path(sys.argv[1]), {})
    spec = McpServerSpec(command=sys.executable, args=[sys.argv[2]])
    await pool.attach("lead", {"notes": spec})
    pid = (await pool.call("lead", "notes", "pid", {})).text
    child = (await pool.call("lead", "notes", "spawn", {})).text
    escaped = (await pool.call("lead", "notes", "escape", {})).text
    # A stalled server never reads its stdin closing: only the leash can end it.
    stalled = asyncio.create_task(pool.call("lead", "notes", "stall", {"mark": sys.argv[3]}))
    while not Path(sys.argv[3]).exists():
        await asyncio.sleep(0.02)
    print(pid, child, escaped, flush=True)
    await stalled

asyncio.run(main())
"""


async def test_kill_9_of_the_daemon_leaves_no_server_nor_its_children_behind(
        tmp_path: Path) -> None:
    server = Path(__file__).parent / "mcp_servers" / "notes.py"
    env = os.environ | {"PYTHONPATH": str(Path(__file__).parent.parent)}
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON, str(tmp_path), str(server),
                               str(tmp_path / "stalled")],
                              stdout=subprocess.PIPE, text=True, env=env)
    pids: list[int] = []
    try:
        assert daemon.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(daemon.stdout.readline), 60)
        pids = [int(word) for word in line.split()]  # the server, what it started
        assert all(alive(pid) for pid in pids)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait(30)
        assert [await gone(pid) for pid in pids] == [True, True, True]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)  # not left behind by a failing run either


@pytest.mark.parametrize("how", ["stopped", "crashed"])
async def test_a_daemon_of_the_servers_own_goes_with_it(pool: McpPool, how: str) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    escaped = int((await pool.call("lead", "notes", "escape", {})).text)
    assert alive(escaped)
    if how == "stopped":
        await pool.detach("lead")
    else:
        assert (await pool.call("lead", "notes", "crash", {})).is_error
    assert await gone(escaped)


async def test_a_server_waiting_out_its_back_off_stops_at_once(tmp_path: Path) -> None:
    pool = McpPool(tmp_path, {}, policy=RestartPolicy(first_delay=600.0, max_delay=600.0))
    await pool.attach("lead", {"notes": notes_spec(env={"NOTES_CRASH_AT_START": "1"})},
                      wait=0)
    deadline = time.monotonic() + 60
    while pool.states()[0].status != ServerStatus.RESTARTING:
        assert time.monotonic() < deadline, pool.states()
        await asyncio.sleep(0.05)
    started = time.monotonic()
    await pool.aclose(grace=1.0)
    assert time.monotonic() - started < 30  # not the 600 s back-off


async def test_a_failed_server_is_tried_again_later(tmp_path: Path) -> None:
    broken = tmp_path / "index-is-broken"
    broken.touch()
    policy = RestartPolicy(first_delay=0.05, max_delay=0.1, crashes=2, retry_failed=0.3,
                           start_timeout=60.0)
    pool = McpPool(tmp_path, {}, policy=policy)
    try:
        await pool.attach("lead", {"notes": notes_spec(env={"NOTES_BROKEN_WHILE": str(broken)})})
        [state] = pool.states()
        assert state.status == ServerStatus.FAILED and "tried again at" in (state.error or "")
        broken.unlink()  # the cause is fixed: a later try succeeds
        deadline = time.monotonic() + 60
        while pool.states()[0].status != ServerStatus.READY:
            assert time.monotonic() < deadline, pool.states()
            await asyncio.sleep(0.05)
        assert (await pool.call("lead", "notes", "lookup", {"q": "x"})).text == "note about x"
    finally:
        await pool.aclose(grace=2.0)


@pytest.mark.parametrize(("slow", "timeout", "status"), [
    (1.0, 60.0, ServerStatus.READY),  # slower than the policy, within its own timeout
    (60.0, 1.0, ServerStatus.FAILED),
], ids=["given-its-timeout", "too-slow"])
async def test_a_slow_starter_gets_its_call_timeout_to_start(
        tmp_path: Path, slow: float, timeout: float, status: ServerStatus) -> None:
    policy = RestartPolicy(start_timeout=0.2, first_delay=0.05, crashes=1)
    pool = McpPool(tmp_path, {}, policy=policy)
    try:
        spec = notes_spec(env={"NOTES_SLOW_START": str(slow)}, timeout=timeout)
        await pool.attach("lead", {"notes": spec}, wait=120)
        [state] = pool.states()
        assert state.status == status, state
        if status == ServerStatus.FAILED:
            assert (state.error or "").startswith("it did not start within 1 s")
    finally:
        await pool.aclose(grace=2.0)


def sleepers(marker: str) -> list[int]:
    """The `sleep` processes whose command line carries `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if entry.name.isdigit() and argv[:2] == [b"sleep", marker.encode()] and alive(
                    int(entry.name)):
                found.append(int(entry.name))
    return found


async def test_an_exit_is_seen_while_a_child_holds_the_servers_stdout(pool: McpPool) -> None:
    notes = notes_spec()
    marker = f"{3600 + os.getpid() % 1000}"  # this test's sleeps, not another's
    spec = McpServerSpec(command="sh", timeout=30, args=(  # the sleep keeps stdout open
        "-c", f'sleep {marker} & exec "{notes.command}" "{notes.args[0]}"'))
    await pool.attach("lead", {"notes": spec})
    crashed = await pool.call("lead", "notes", "crash", {})
    assert crashed.text.startswith("the server `notes` exited (code 1) during the call")
    assert (await pool.call("lead", "notes", "lookup", {"q": "x"})).text == "note about x"
    assert len(sleepers(marker)) == 1  # the crashed server's went with it
    await pool.detach("lead")
    deadline = time.monotonic() + 30
    while sleepers(marker):
        assert time.monotonic() < deadline, "a stopped server's child is left"
        await asyncio.sleep(0.05)
