"""MCP servers in a running hive: started once trusted, their tools offered to the
agent (real SDK path, fake Messages API), every call in the audit log and `hivemind
log`, counted by the loop breaker, shown in status, shared by agents, stopped at the
end. The server is a real stdio server written with the `mcp` SDK."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hivemind.agent.prompt import FixedTokens
from hivemind.cli.app import app
from hivemind.cli.top.snapshot import HiveReader
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from hivemind.hive.mcptrust import fingerprints
from hivemind.hive.rom import RomRegistry
from hivemind.hive.trust import grant
from hivemind.llm.offline import OfflineProvider
from hivemind.settings import AgentSettings
from hivemind.tools import default_registry
from tests import scripted_model, test_mcp_pool_http
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import fast_config, run_until_idle, until, write_agent, write_task
from tests.scripted_model import tool_use

SERVER = Path(__file__).parent / "mcp_servers" / "notes.py"
endpoint = test_mcp_pool_http.endpoint  # a fixture: the streamable-HTTP server of the tests


def notes_block(command: str = sys.executable, *args: str, extra: str = "") -> str:
    shown = json.dumps([*args, str(SERVER)])
    return (f"mcp:\n  notes:\n    command: {json.dumps(command)}\n    args: {shown}\n"
            f"{extra}")


def trust(hive: Hive) -> None:
    roms = RomRegistry(hive, AgentSettings())
    roms.tells_problems = False
    grant(hive, None, fingerprints(roms.configs()))


def audit(hive: Hive, agent: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in hive.audit_path(agent).read_text().splitlines() if x]


def calls(hive: Hive, agent: str) -> list[dict[str, Any]]:
    return [c for r in audit(hive, agent) for c in r.get("tool_calls") or []]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def mcp_task(hive: Hive, stem: str, tool: str, args: str = "{}") -> None:
    write_task(hive, stem, front=f"mcp: notes.{tool}\nmcp_args: {args}\n")


def test_offline_a_task_naming_a_tool_is_done_with_its_result(hive: Hive) -> None:
    write_agent(hive, "lead", notes_block())
    trust(hive)
    mcp_task(hive, "t1", "lookup", "{q: bees}")
    mcp_task(hive, "t2", "pid")
    run_until_idle(hive, timeout=90)
    assert "note about bees" in (hive.done_dir / "t1.md").read_text()
    pid = int((hive.done_dir / "t2.md").read_text().rsplit("\n", 2)[-2].strip())
    assert not alive(pid)  # stopped with the daemon
    [lookup] = [c for c in calls(hive, "lead") if c["name"] == "mcp__notes__lookup"]
    assert (lookup["input"], lookup["result"], lookup["error"]) == (
        {"q": "bees"}, "note about bees", False)
    log = CliRunner().invoke(app, ["log", "lead", "--hive", str(hive.root)])
    assert "mcp__notes__lookup q=bees → note about bees" in log.output


def test_untrusted_nothing_starts_and_the_task_fails_saying_why(hive: Hive) -> None:
    started = hive.root / "started"
    write_agent(hive, "lead", notes_block(
        "sh", "-c", f'touch {started}; exec "$0" "$@"', sys.executable))
    mcp_task(hive, "t1", "lookup", "{q: bees}")
    daemon = run_until_idle(hive, timeout=90)
    assert not started.exists()
    assert daemon.mcp.pool is None
    text = (hive.failed_dir / "t1.md").read_text()
    assert "mcp__notes__lookup is not among this agent's tools" in text


def test_the_model_is_offered_the_tools_and_its_calls_run(hive: Hive) -> None:
    write_agent(hive, "lead", notes_block(extra="    tools: [lookup, big]\n"))
    trust(hive)
    write_task(hive, "t1", "Look up bees.")
    with FakeAnthropic() as api:
        api.responder = scripted_model.scripted(
            [tool_use(1, "mcp__notes__lookup", q="bees"),
             {"type": "tool_use", "id": "toolu_2", "name": "mcp__notes__big",
              "input": {"n": 5_000_000}}],
            [tool_use(3, "complete_task", task_id="t1", result="bees noted")],
        )
        run_until_idle(hive, scripted_model.provider(api), timeout=90)
        first, second = (r.body for r in api.message_requests[:2])
    tools = {t["name"]: t for t in first["tools"]}
    assert [n for n in tools if n.startswith("mcp__")] == [
        "mcp__notes__big", "mcp__notes__lookup"]  # the allow-list; a stable order, last
    assert list(tools)[-1] == "mcp__notes__lookup"
    assert tools["mcp__notes__lookup"]["description"] == "Look a note up by its title."
    assert tools["mcp__notes__lookup"]["input_schema"]["properties"]["q"] == {"type": "string"}
    looked, big = scripted_model.last_results(second)
    assert looked == "note about bees"
    assert len(big) < 21_000
    assert big.endswith("more characters cut]")
    assert "bees noted" in (hive.done_dir / "t1.md").read_text()


def test_a_server_error_is_a_tool_error_and_repeats_trip_the_loop_breaker(hive: Hive) -> None:
    write_agent(hive, "lead", notes_block())
    trust(hive)
    write_task(hive, "t1", "Look up bees.")
    with FakeAnthropic() as api:
        api.responder = scripted_model.scripted(
            *[[tool_use(i, "mcp__notes__fail", task_id="t1")] for i in range(1, 6)])
        run_until_idle(hive, scripted_model.provider(api), timeout=90)
        second = api.message_requests[1].body
    [result] = scripted_model.last_results(second)
    assert "Error executing tool fail" in result  # the SDK's words for its exception
    fails = [c for c in calls(hive, "lead") if c["name"] == "mcp__notes__fail"]
    assert all(c["error"] for c in fails)
    text = (hive.failed_dir / "t1.md").read_text()
    assert "the same tool call was repeated 3 times" in text


def test_two_agents_share_one_server_and_status_shows_it(hive: Hive) -> None:
    write_agent(hive, "ann", notes_block())
    write_agent(hive, "bob", notes_block())
    trust(hive)

    async def main() -> None:
        daemon = Daemon(hive, fast_config(hive), OfflineProvider(),
                        RunOptions(idle_settle=0.2))
        run = asyncio.ensure_future(daemon.run())
        try:
            await until(lambda: bool(daemon.mcp.states()) and daemon.mcp.states()[0].agents
                        == ("ann", "bob") and daemon.mcp.states()[0].status == "ready",
                        "both agents use the server", timeout=60)
            [state] = daemon.mcp.states()
            assert state.pid is not None and state.tools >= 5
            # Its tools' definitions count in the prompt's budget.
            cfg = daemon.services.roms.load("ann")
            alone = FixedTokens(default_registry(), daemon.services.counter)(cfg)
            assert daemon.services.fixed_tokens(cfg) > alone + 100
            await until(lambda: "mcp_servers" in hive.status_file.read_text()
                        and '"ready"' in hive.status_file.read_text(), "status.json says so")
            out = CliRunner().invoke(app, ["status", str(hive.root)])
            assert "MCP servers" in out.output and "ann, bob" in out.output, out.output
            top = HiveReader(hive).snapshot().daemon.text
            assert f"MCP: notes ready ({state.tools} tools)" in top
            pid = state.pid
        finally:
            daemon.stop("test")
            await asyncio.wait_for(run, 60)
        assert not alive(pid)

    asyncio.run(main())


def test_a_daemon_killed_with_9_leaves_no_server_behind(hive: Hive, tmp_path: Path) -> None:
    write_agent(hive, "lead", notes_block())
    trust(hive)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    with (tmp_path / "out.log").open("wb") as out:
        daemon = subprocess.Popen([sys.executable, "-m", "hivemind", "run", str(hive.root),
                                   "--offline"], env=env, stdout=out, stderr=out)
    try:
        pid = None
        deadline = time.monotonic() + 60
        while pid is None and time.monotonic() < deadline and daemon.poll() is None:
            time.sleep(0.05)
            with contextlib.suppress(OSError, ValueError):
                servers = json.loads(hive.status_file.read_text()).get("mcp_servers") or []
                pid = next((s["pid"] for s in servers if s.get("pid")), None)
        assert pid is not None, (tmp_path / "out.log").read_text()
        assert alive(pid)
    finally:
        daemon.kill()
        daemon.wait()
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_trusting_while_it_runs_starts_the_server_and_an_edit_restarts_it(hive: Hive) -> None:
    rom = write_agent(hive, "lead", notes_block())

    def ready() -> list[int]:
        return [s.pid for s in daemon.mcp.states() if s.status == "ready" and s.pid]

    async def main() -> None:
        run = asyncio.ensure_future(daemon.run())
        try:
            await until(hive.status_file.exists, "the daemon runs")
            assert daemon.mcp.pool is None  # untrusted: nothing started
            trust(hive)
            await until(lambda: bool(ready()), "the trusted server is ready", timeout=60)
            [first] = ready()
            rom.write_text(rom.read_text().replace("mcp:\n  notes:\n",
                                                   "mcp:\n  notes:\n    env: {X: '1'}\n"))
            # Changed, so no longer trusted: it stops; trusted again, it starts anew.
            await until(lambda: not alive(first), "the changed server stops", timeout=60)
            trust(hive)
            await until(lambda: bool(ready()), "the edited server is ready", timeout=60)
            assert ready() != [first]
        finally:
            daemon.stop("test")
            await asyncio.wait_for(run, 60)

    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions(idle_settle=0.2))
    asyncio.run(main())


def test_an_agent_naming_servers_runs_in_the_lead_the_others_in_workers(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob", notes_block())
    trust(hive)
    mcp_task(hive, "t1", "lookup", "{q: bees}")
    (hive.tasks_dir / "t1.md").write_text(
        (hive.tasks_dir / "t1.md").read_text().replace("---\n", "---\nassignee: bob\n", 1))
    daemon = run_until_idle(hive, timeout=120, workers=2)
    assert [link.agents for link in daemon.workers] == [("ann",)]
    assert daemon.runners["bob"].worker is None
    assert "note about bees" in (hive.done_dir / "t1.md").read_text()


def test_inspect_says_the_servers_tools_come_with_the_daemon(hive: Hive) -> None:
    write_agent(hive, "lead", notes_block())
    out = CliRunner().invoke(app, ["inspect", "lead", "--request", "--hive", str(hive.root)])
    assert out.exit_code == 0, out.output
    assert "(and the tools of its MCP servers notes, which the running daemon adds" in (
        " ".join(out.output.split()))


def test_a_paused_agents_server_stops_and_starts_again_on_resume(hive: Hive) -> None:
    write_agent(hive, "lead", notes_block())
    trust(hive)

    def ready() -> list[int]:
        return [s.pid for s in daemon.mcp.states() if s.status == "ready" and s.pid]

    async def main() -> None:
        run = asyncio.ensure_future(daemon.run())
        try:
            await until(lambda: bool(ready()), "the server is ready", timeout=60)
            [first] = ready()
            paused = CliRunner().invoke(app, ["pause", "lead", "--hive", str(hive.root)])
            assert paused.exit_code == 0, paused.output
            await until(lambda: not alive(first) and not daemon.mcp.states(),
                        "the paused agent's server stops", timeout=60)
            resumed = CliRunner().invoke(app, ["resume", "lead", "--hive", str(hive.root)])
            assert resumed.exit_code == 0, resumed.output
            await until(lambda: bool(ready()), "the server is back", timeout=60)
        finally:
            daemon.stop("test")
            await asyncio.wait_for(run, 60)

    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions(idle_settle=0.2))
    asyncio.run(main())


def test_an_http_server_gets_the_users_variable_in_its_header(
    hive: Hive, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_KEY", "k-123")
    write_agent(hive, "lead", f"mcp:\n  search:\n    url: {endpoint}\n"
                "    headers: {Authorization: 'Bearer ${SEARCH_KEY}'}\n")
    trust(hive)
    write_task(hive, "t1", front="mcp: search.header\nmcp_args: {name: Authorization}\n")
    run_until_idle(hive, timeout=90)
    assert "Bearer k-123" in (hive.done_dir / "t1.md").read_text()


def test_a_server_crash_and_its_return_are_said_on_the_console(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(hive, "lead", notes_block())
    trust(hive)
    mcp_task(hive, "t1", "crash")

    async def main() -> None:
        run = asyncio.ensure_future(daemon.run())
        try:
            await until(lambda: "MCP server `notes` stopped" in caplog.text,
                        "the crash is said", timeout=60)
            await until(lambda: "MCP server `notes` is back" in caplog.text,
                        "its return is said", timeout=60)
        finally:
            daemon.stop("test")
            await asyncio.wait_for(run, 60)

    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions(idle_settle=0.2))
    asyncio.run(main())
    assert "the index is corrupt" in caplog.text  # what it said on stderr last


def test_a_task_naming_a_server_goes_to_an_agent_that_names_it(hive: Hive) -> None:
    write_agent(hive, "ann", "skills: [lookup, notes, bees]\n")
    write_agent(hive, "bob", notes_block())
    trust(hive)
    write_task(hive, "t1", "Look up the notes on bees.",
               front="mcp: notes.lookup\nmcp_args: {q: bees}\n")
    run_until_idle(hive, timeout=90)
    done = (hive.done_dir / "t1.md").read_text()
    assert "agent: bob" in done and "note about bees" in done
