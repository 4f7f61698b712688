"""The MCP pool over stdio: one process per server shared by its agents, tools listed
and called through the real SDK, allow-lists, environment and folder confinement."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hivemind.mcp import serverlog
from hivemind.mcp.api import ServerStatus
from hivemind.mcp.pool import McpPool
from hivemind.mcpspec import McpServerSpec
from tests.mcp_helpers import QUICK, alive, gone, notes_spec


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[McpPool]:
    root = tmp_path / "hive"
    root.mkdir()
    pool = McpPool(root, {"NOTES_TOKEN": "t0ken"}, log_dir=tmp_path / "logs", policy=QUICK)
    try:
        yield pool
    finally:
        await pool.aclose(grace=2.0)


async def pid_of(pool: McpPool, agent: str = "lead") -> int:
    result = await pool.call(agent, "notes", "pid", {})
    assert not result.is_error, result.text
    return int(result.text)


async def test_tools_are_listed_with_the_servers_descriptions_and_schemas(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    tools = pool.tools_for("lead")
    names = [t.full_name for t in tools]
    assert names == sorted(names) and "mcp__notes__lookup" in names
    lookup = next(t for t in tools if t.name == "lookup")
    assert lookup.description == "Look a note up by its title."
    assert lookup.input_schema["properties"]["q"]["type"] == "string"
    assert lookup.input_schema["required"] == ["q"]


async def test_a_call_returns_the_tools_text(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    result = await pool.call("lead", "notes", "lookup", {"q": "bees"})
    assert (result.text, result.is_error, result.cut) == ("note about bees", False, 0)


async def test_tools_follow_the_server_name_order_across_servers(pool: McpPool) -> None:
    await pool.attach("lead", {"zeta": notes_spec(tools=["pid"]),
                               "alpha": notes_spec(tools=["lookup", "env"])})
    assert [t.full_name for t in pool.tools_for("lead")] == [
        "mcp__alpha__env", "mcp__alpha__lookup", "mcp__zeta__pid"]


async def test_the_allow_list_hides_and_refuses_other_tools(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec(tools=["lookup"])})
    assert [t.name for t in pool.tools_for("lead")] == ["lookup"]
    refused = await pool.call("lead", "notes", "env", {"name": "HOME"})
    assert refused.is_error and "allow-list" in refused.text


async def test_an_unknown_tool_or_server_is_an_error_result(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    unknown = await pool.call("lead", "notes", "erase", {})
    assert unknown.is_error and "no tool `erase`" in unknown.text
    elsewhere = await pool.call("lead", "mail", "send", {})
    assert elsewhere.is_error and "`mail`" in elsewhere.text


async def test_the_tools_own_error_comes_back_as_an_error(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    result = await pool.call("lead", "notes", "fail", {})
    assert result.is_error and "fail" in result.text
    assert pool.states()[0].status == ServerStatus.READY


async def test_a_protocol_error_comes_back_bounded(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    short = await pool.call("lead", "notes", "refuse", {"n": 5})
    assert short.is_error and short.text == "the server `notes` refused the call: rrrrr"
    long = await pool.call("lead", "notes", "refuse", {"n": 100_000})
    assert long.is_error and long.cut > 90_000 and len(long.text) < 2_100
    assert pool.states()[0].status == ServerStatus.READY


async def test_two_agents_share_one_server_process(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    await pool.attach("scout", {"notes": notes_spec(tools=["pid"], timeout=30)})
    assert await pid_of(pool, "lead") == await pid_of(pool, "scout")
    [state] = pool.states()
    assert state.agents == ("lead", "scout") and state.status == ServerStatus.READY
    assert state.pid == await pid_of(pool)


async def test_a_changed_spec_restarts_the_server(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    before = await pid_of(pool)
    await pool.attach("lead", {"notes": notes_spec(env={"MODE": "fast"})})
    after = await pid_of(pool)
    assert after != before and await gone(before)
    assert len(pool.states()) == 1


async def test_a_changed_allow_list_or_timeout_keeps_the_process(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec(tools=["pid"])})
    before = await pid_of(pool)
    await pool.attach("lead", {"notes": notes_spec(tools=["pid", "lookup"], timeout=5)})
    assert await pid_of(pool) == before
    assert [t.name for t in pool.tools_for("lead")] == ["lookup", "pid"]


async def test_a_server_no_agent_names_is_stopped(pool: McpPool) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    await pool.attach("scout", {"notes": notes_spec()})
    pid = await pid_of(pool)
    await pool.detach("lead")
    assert alive(pid) and pool.states()[0].agents == ("scout",)
    await pool.detach("scout")
    assert await gone(pid)
    assert pool.states() == []


async def test_aclose_stops_every_server(tmp_path: Path) -> None:
    pool = McpPool(tmp_path, {}, policy=QUICK)
    await pool.attach("lead", {"notes": notes_spec(), "other": notes_spec(tools=["pid"])})
    pids = [int((await pool.call("lead", name, "pid", {})).text) for name in ("notes", "other")]
    await pool.aclose(grace=3.0)
    assert [await gone(pid) for pid in pids] == [True, True]
    with pytest.raises(RuntimeError):
        await pool.attach("lead", {"notes": notes_spec()})


async def test_the_server_sees_only_the_default_env_and_what_the_rom_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAEMON_SECRET", "hunter2")
    pool = McpPool(tmp_path, os.environ, policy=QUICK)
    try:
        await pool.attach("lead", {"notes": notes_spec(
            env={"TOKEN": "${DAEMON_SECRET}", "PLAIN": "as written"})})
        seen = {name: (await pool.call("lead", "notes", "env", {"name": name})).text
                for name in ("DAEMON_SECRET", "TOKEN", "PLAIN", "PATH")}
    finally:
        await pool.aclose(grace=2.0)
    assert seen["DAEMON_SECRET"] == "<unset>"
    assert (seen["TOKEN"], seen["PLAIN"]) == ("hunter2", "as written")
    assert seen["PATH"] == os.environ["PATH"]


async def test_the_server_runs_in_its_folder_inside_the_hive(pool: McpPool) -> None:
    (pool.hive_root / "tools").mkdir()
    await pool.attach("lead", {"notes": notes_spec(cwd="tools")})
    result = await pool.call("lead", "notes", "cwd", {})
    assert Path(result.text) == (pool.hive_root / "tools").resolve()


async def test_a_folder_that_leads_outside_the_hive_is_refused(
        pool: McpPool, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (pool.hive_root / "tools").symlink_to(tmp_path / "elsewhere")
    await pool.attach("lead", {"notes": notes_spec(cwd="tools")})
    [state] = pool.states()
    assert state.status == ServerStatus.FAILED
    assert state.error is not None and "outside the hive" in state.error
    assert "\n" not in state.error and pool.tools_for("lead") == []


async def test_a_missing_command_fails_at_once_with_one_line(pool: McpPool) -> None:
    spec = notes_spec().model_copy(update={"command": "no-such-mcp-server"})
    await pool.attach("lead", {"notes": spec})
    [state] = pool.states()
    assert state.status == ServerStatus.FAILED and state.restarts == 0
    assert state.error == "command 'no-such-mcp-server' is not found on PATH"
    result = await pool.call("lead", "notes", "lookup", {"q": "x"})
    assert result.is_error and "not found on PATH" in result.text


async def test_stderr_goes_to_the_servers_log_file(pool: McpPool, tmp_path: Path) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    await pool.call("lead", "notes", "crash", {})
    await asyncio.to_thread(serverlog.flush)
    text = (tmp_path / "logs" / "notes.log").read_text()
    assert "starting" in text and "notes: the index is corrupt" in text
    await pool.detach("lead")
    await asyncio.to_thread(serverlog.flush)
    assert (tmp_path / "logs" / "notes.log").read_text().endswith(" stopped\n")


async def test_a_log_file_linking_out_is_not_written_through(
        tmp_path: Path) -> None:
    bashrc = tmp_path / ".bashrc"
    bashrc.write_text("the user's own file\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "notes.log").symlink_to(bashrc)
    pool = McpPool(tmp_path, {}, log_dir=tmp_path / "logs", policy=QUICK)
    try:
        await pool.attach("lead", {"notes": notes_spec()})
        assert not (await pool.call("lead", "notes", "lookup", {"q": "x"})).is_error
    finally:
        await pool.aclose(2.0)
    await asyncio.to_thread(serverlog.flush)
    assert bashrc.read_text() == "the user's own file\n"


async def test_tools_a_server_adds_are_offered_once_it_says_so(
        pool: McpPool, tmp_path: Path) -> None:
    await pool.attach("lead", {"notes": notes_spec()})
    assert (await pool.call("lead", "notes", "grow", {"name": "tally"})).text == "grown"
    deadline = time.monotonic() + 30
    while "tally" not in {t.name for t in pool.tools_for("lead")}:
        assert time.monotonic() < deadline, "the new tool was never listed"
        await asyncio.sleep(0.05)
    assert (await pool.call("lead", "notes", "tally", {})).text == "I am tally"
    await asyncio.to_thread(serverlog.flush)
    assert "info: grew tally" in (tmp_path / "logs" / "notes.log").read_text()


async def test_the_sdks_complaints_go_to_the_servers_log_not_the_console(
        pool: McpPool, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    notes = notes_spec()
    banner = McpServerSpec(command="sh", args=(  # a banner on stdout, before the server
        "-c", f'echo "NOTES READY!!!"; exec "{notes.command}" "{notes.args[0]}"'))
    await pool.attach("lead", {"notes": banner})
    assert (await pool.call("lead", "notes", "lookup", {"q": "x"})).text == "note about x"
    await asyncio.to_thread(serverlog.flush)
    text = (tmp_path / "logs" / "notes.log").read_text()
    assert "mcp sdk error: Failed to parse JSONRPC message" in text
    assert "JSON" not in capfd.readouterr().err


async def test_a_tool_name_a_model_cannot_take_is_offered_as_a_safe_one(
        pool: McpPool, tmp_path: Path) -> None:
    # lead's allow-list names the server's own names; scout may use every tool
    await pool.attach("lead", {"notes": notes_spec(tools=["files.read", "lookup", "y" * 70])})
    await pool.attach("scout", {"notes": notes_spec()})
    assert (await pool.call("scout", "notes", "grow", {"name": "files.read"})).text == "grown"
    assert (await pool.call("scout", "notes", "grow", {"name": "y" * 70})).text == "grown"
    deadline = time.monotonic() + 30
    while len(pool.tools_for("lead")) < 3:
        assert time.monotonic() < deadline, pool.tools_for("lead")
        await asyncio.sleep(0.05)
    names = [t.full_name for t in pool.tools_for("lead")]
    assert names[0] == "mcp__notes__files_read" and names[1] == "mcp__notes__lookup"
    assert all(len(n) <= 64 and n.replace("_", "").isalnum() for n in names)
    safe = {t.name for t in pool.tools_for("lead")}
    for name in safe - {"lookup"}:
        result = await pool.call("lead", "notes", name, {})
        assert result.text in ("I am files.read", "I am " + "y" * 70), result.text
    await asyncio.to_thread(serverlog.flush)
    assert "its tool 'files.read' is offered as 'files_read'" in (
        tmp_path / "logs" / "notes.log").read_text()
