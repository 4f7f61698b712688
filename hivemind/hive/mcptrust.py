"""The user's trust in the MCP servers a hive's ROMs name.

A server is a program to run or an address to contact, chosen by whoever wrote the
hive: none starts before the user has run `hivemind trust`, which records each
server's fingerprint (`<agent>/<server>` → `McpServerSpec.fingerprint`) beside the
hive.toml digest (see `trust`), and the sha256 of each hive file it runs (its script:
see `mcpfiles`). A server added or changed since, or whose script changed, needs
trusting again; until then it is a problem of its ROM (`warnings`), and the agent runs
without it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from hivemind.hive.layout import Hive
from hivemind.hive.trust import read_record
from hivemind.mcpfiles import ServerFiles, server_files
from hivemind.mcpspec import TOOL_PREFIX, McpServerSpec
from hivemind.settings import AgentConfig


class ServerTrust(StrEnum):
    TRUSTED = "trusted"
    UNTRUSTED = "not trusted"
    CHANGED = "changed since you trusted it"
    FILE_CHANGED = "runs a file changed since you trusted it"
    REFUSED = "refused"  # it names a file out of the hive (a link), or one too large


@dataclass(frozen=True)
class Verdict:
    """One server's trust, and the hive files it runs as they are now."""

    state: ServerTrust
    files: ServerFiles
    why: str = ""
    """For FILE_CHANGED and REFUSED: which file, and what is wrong, in a few words."""


def server_key(agent: str, server: str) -> str:
    return f"{agent}/{server}"


def fingerprints(configs: Mapping[str, AgentConfig]) -> dict[str, str]:
    """What `hivemind trust` records of the ROMs' servers now."""
    return {server_key(agent, name): spec.fingerprint()
            for agent, cfg in sorted(configs.items()) for name, spec in cfg.mcp.items()}


def file_digests(configs: Mapping[str, AgentConfig], root: Path) -> dict[str, dict[str, str]]:
    """What `hivemind trust` records of the hive files the ROMs' servers run now."""
    out = {}
    for agent, cfg in sorted(configs.items()):
        for name, spec in cfg.mcp.items():
            if digests := server_files(spec, root).digests:
                out[server_key(agent, name)] = digests
    return out


def verdicts(
    trusted_as: Hive, agent: str, servers: Mapping[str, McpServerSpec],
    root: Path | None = None,
) -> dict[str, Verdict]:
    """Each of the agent's servers: trusted, never trusted, changed since, running a
    file changed since, or refused (`trusted_as`: the hive whose trust applies, a
    scratch copy's is the original's; `root`: where the files are, default its own)."""
    if not servers:
        return {}
    record = read_record(trusted_as)
    trusted = record.mcp if record is not None else {}
    trusted_files = record.mcp_files if record is not None else {}
    out = {}
    for name, spec in servers.items():
        key = server_key(agent, name)
        files = server_files(spec, root or trusted_as.root)
        was = trusted.get(key)
        if was is None or was != spec.fingerprint():
            state = ServerTrust.UNTRUSTED if was is None else ServerTrust.CHANGED
            out[name] = Verdict(state, files, files.problem or "")
        elif files.problem is not None:
            out[name] = Verdict(ServerTrust.REFUSED, files, files.problem)
        elif changed := files.changed_since(trusted_files.get(key, {})):
            out[name] = Verdict(ServerTrust.FILE_CHANGED, files,
                                f"{', '.join(changed)} changed since you trusted it")
        else:
            out[name] = Verdict(ServerTrust.TRUSTED, files)
    return out


def server_trust(
    trusted_as: Hive, agent: str, servers: Mapping[str, McpServerSpec],
    root: Path | None = None,
) -> dict[str, ServerTrust]:
    """Each of the agent's servers' trust state (see `verdicts`)."""
    return {n: v.state for n, v in verdicts(trusted_as, agent, servers, root).items()}


def trusted_servers(
    trusted_as: Hive, agent: str, servers: Mapping[str, McpServerSpec],
    root: Path | None = None,
) -> dict[str, tuple[McpServerSpec, dict[str, str]]]:
    """The servers of `servers` the user trusts as they are now, the ones that may
    start, each with the digests of the hive files it runs (the ones trusted)."""
    return {n: (servers[n], v.files.digests)
            for n, v in verdicts(trusted_as, agent, servers, root).items()
            if v.state is ServerTrust.TRUSTED}


def warnings(
    trusted_as: Hive, agent: str, servers: Mapping[str, McpServerSpec],
    environ: Mapping[str, str], tools: Sequence[str] | None = None,
    root: Path | None = None,
) -> list[str]:
    """What keeps a ROM's servers from running as written, one line each: not trusted
    (or changed since), a `${VAR}` the environment lacks, a `tools:` allow-list (`tools`)
    that allows none of a server's tools."""
    out = []
    for name in servers if tools is not None else ():
        mine = f"{TOOL_PREFIX}{name}"
        if not any(t == mine or t.startswith(mine + "__") for t in tools or ()):
            out.append(f"MCP server `{name}`: `tools:` allows none of its tools, so the "
                       f"agent gets none (add {mine} for all, or {mine}__<tool>)")
    for name, verdict in verdicts(trusted_as, agent, servers, root).items():
        state = verdict.state
        if state is ServerTrust.REFUSED:
            out.append(f"MCP server `{name}` refused: {verdict.why}; it does not start, "
                       "and the agent runs without its tools")
        elif state is ServerTrust.FILE_CHANGED:
            out.append(f"MCP server `{name}`: {verdict.why}; it does not start, and the "
                       "agent runs without its tools; read the file, then run "
                       "`hivemind trust`")
        elif state is not ServerTrust.TRUSTED:
            out.append(f"MCP server `{name}` {state.value}: it does not start, and the "
                       "agent runs without its tools; read the ROM, then run "
                       "`hivemind trust`")
        elif missing := servers[name].missing_vars(environ):
            names = ", ".join(f"${{{v}}}" for v in missing)
            out.append(f"MCP server `{name}`: {names} not set in your environment "
                       "(passed empty)")
    return out


def describe(spec: McpServerSpec) -> str:
    """What runs or is contacted, for `hivemind trust`: the command and its arguments or
    the url; the environment it gets (names only: values may be secrets) and from where."""
    if spec.command is not None:
        what = " ".join(_word(w) for w in (spec.command, *spec.args))
        if spec.cwd:
            what += f" (in {_shown(spec.cwd)}/)"
    else:
        what = _shown(spec.url or "")
    env = [_value(k, v) for k, v in sorted(spec.env.items())]
    headers = [_value(k, v) for k, v in sorted(spec.headers.items())]
    return (what + (f"; env: {', '.join(env)}" if env else "")
            + (f"; headers: {', '.join(headers)}" if headers else ""))


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
LOADERS = frozenset({
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES",
    "DYLD_LIBRARY_PATH", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE",
    "NODE_OPTIONS", "NODE_PATH", "BASH_ENV", "ENV", "PERL5LIB", "PERL5OPT", "RUBYOPT",
    "RUBYLIB", "JAVA_TOOL_OPTIONS", "GIT_SSH_COMMAND",
})
"""Environment variables that change what a program loads or runs, beyond its command."""


def alarms(spec: McpServerSpec, key_vars: Sequence[str]) -> list[str]:
    """What `hivemind trust` says loudly of a server: it is given your model provider's
    key (`key_vars`: the variables that hold it), or an environment variable that makes
    its program load other code than the command shows."""
    out = []
    where = [(f"env {_shown(k)}", v) for k, v in sorted(spec.env.items())] + [
        (f"header {_shown(k)}", v) for k, v in sorted(spec.headers.items())]
    for place, value in where:
        for var in _VAR.findall(value):
            if var in key_vars:
                out.append(f"it is given your model provider's key ${{{var}}} ({place}): "
                           "it could spend on your account or leak it; trust it only if "
                           "it must have it")
    loaders = sorted(_shown(k) for k in spec.env if k.upper() in LOADERS)
    if loaders:
        out.append(f"its env sets {', '.join(loaders)}: what the program loads is then "
                   "more than its command shows; read what that names")
    return out


def _value(key: str, value: str) -> str:
    """`TOKEN from ${GITHUB_TOKEN}` (a value of the user's environment), or `DIR=notes`."""
    names = _VAR.findall(value)
    key = _shown(key)
    return (f"{key} from {', '.join('${' + n + '}' for n in names)}" if names
            else f"{key}={_shown(value)}")


def _shown(text: str) -> str:
    """`text` as written, or escaped (`'a\\x1b[8m'`) if it has a character a terminal
    would act on or hide: the trust must show what runs, not what the hive's escape
    sequences make of the line."""
    return text if text.isprintable() else repr(text)


def _word(text: str) -> str:
    """One word of a command line, quoted when it has spaces (it is one argument) and
    escaped when it has control characters."""
    return repr(text) if not text.isprintable() else shlex.quote(text)
