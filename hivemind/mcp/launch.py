"""How a server is started or reached: its command on the leash, its environment, its
folder (confined to the hive), its HTTP headers. A problem here is the ROM's, said in
one line; no retry can fix it, so the server is marked failed at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mcp.client.stdio import StdioServerParameters, get_default_environment

from hivemind.mcp import leash
from hivemind.mcpfiles import program, server_files
from hivemind.mcpspec import McpServerSpec, expand


class LaunchProblem(Exception):
    """The ROM's settings for a server cannot work (one line for `status`)."""


@dataclass(frozen=True)
class HttpTarget:
    url: str
    headers: dict[str, str] = field(default_factory=dict)


def launch_key(spec: McpServerSpec, files: Mapping[str, str] | None = None) -> str:
    """What decides the process or connection: the spec without the per-agent settings
    (the allow-list and the call timeout), so agents that differ only there share it,
    and the digests of the hive files it runs (`files`)."""
    key = spec.model_copy(update={"tools": None, "timeout": 60.0}).fingerprint()
    return key + ("".join(f":{p}={d}" for p, d in sorted(files.items())) if files else "")


def check_files(spec: McpServerSpec, hive_root: Path, trusted: Mapping[str, str]) -> None:
    """LaunchProblem unless the hive files `spec` runs are the bytes trusted."""
    now = server_files(spec, hive_root)
    if now.problem is not None:
        raise LaunchProblem(now.problem)
    if changed := now.changed_since(trusted):
        raise LaunchProblem(f"{', '.join(changed)} changed since you trusted it: read it, "
                            "then run `hivemind trust`")


def stdio_parameters(spec: McpServerSpec, hive_root: Path,
                     environ: Mapping[str, str]) -> StdioServerParameters:
    """The command the SDK's stdio client runs: the server on its leash, in its folder,
    with the small default environment plus the ROM's `env` (`${VAR}` from `environ`)."""
    assert spec.command is not None
    cwd = confined_cwd(spec.cwd, hive_root)
    env = {key: expand(value, environ) for key, value in spec.env.items()}
    program = _resolve(spec.command, cwd, (get_default_environment() | env).get("PATH"))
    if sys.platform == "win32":  # no leash there: the SDK's job object ends the server
        return StdioServerParameters(command=program, args=list(spec.args), env=env, cwd=cwd)
    argv = leash.command(os.getpid(), program, list(spec.args))
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd,
                                 encoding_error_handler="replace")


def http_target(spec: McpServerSpec, environ: Mapping[str, str]) -> HttpTarget:
    assert spec.url is not None
    return HttpTarget(spec.url, {k: expand(v, environ) for k, v in spec.headers.items()})


def confined_cwd(cwd: str | None, hive_root: Path) -> Path:
    """The server's folder: `cwd` inside the hive (the hive itself by default), refused
    when it resolves outside it (through a link, say) or is not a folder."""
    root = hive_root.resolve()
    if cwd is None:
        return root
    where = (root / cwd).resolve()
    if not where.is_relative_to(root):
        raise LaunchProblem(f"cwd {cwd!r} resolves outside the hive ({where})")
    if not where.is_dir():
        raise LaunchProblem(f"cwd {cwd!r} is not a folder in the hive")
    return where


def _resolve(command: str, cwd: Path, path: str | None) -> str:
    """`command` as a path to run, or a LaunchProblem saying it is not there (found as
    the trust found it: a relative PATH entry is a folder of the server's, see
    `mcpfiles.program`)."""
    found = program(command, str(cwd), path)
    if os.sep in command or (os.altsep and os.altsep in command):
        if found is None or not (os.path.isfile(found) and os.access(found, os.X_OK)):
            raise LaunchProblem(f"command {command!r} is not a program in {cwd}")
        return found
    if found is None:
        raise LaunchProblem(f"command {command!r} is not found on PATH")
    return found
