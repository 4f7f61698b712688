"""The daemon's MCP servers: one per (server name, launch settings), shared by the
agents that name it (the contract is in `api`).

A stdio server runs on a leash (`leash`): it dies with the daemon, even one killed with
-9, as long as the pool's event loop runs in a thread that lives as long as the daemon
(the kernel ties the server to the thread that started it). Agents whose ROMs differ
only in a server's allow-list (`tools`) or `timeout` share its process.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hivemind.mcp.api import McpResult, McpTool, ServerState
from hivemind.mcp.api import ServerStatus as Status
from hivemind.mcp.launch import launch_key
from hivemind.mcp.server import ManagedServer, RestartPolicy
from hivemind.mcp.serverlog import ServerLog, keep_sdk_records
from hivemind.mcpspec import McpServerSpec

MAX_CHARS = 20_000
_Key = tuple[str, str]  # (server name, launch key)


class McpPool:
    """The MCP servers of one daemon (see `api` for how the rest uses it)."""

    def __init__(self, hive_root: Path, environ: Mapping[str, str] | None = None, *,
                 log_dir: Path | None = None, policy: RestartPolicy | None = None,
                 grace: float = 5.0) -> None:
        """`environ` is where `${VAR}`s are looked up (a copy is kept); `log_dir` gets
        each server's stderr as `<name>.log` (else only its last lines are kept)."""
        self.hive_root = hive_root
        self.environ = dict(os.environ if environ is None else environ)
        self.log_dir = log_dir
        self.policy = policy or RestartPolicy()
        self.grace = grace
        self._agents: dict[str, dict[str, tuple[McpServerSpec, _Key]]] = {}
        self._servers: dict[_Key, ManagedServer] = {}
        self._logs: dict[str, ServerLog] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        keep_sdk_records()

    async def attach(self, agent: str, servers: Mapping[str, McpServerSpec], *,
                     wait: float | None = None,
                     files: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """`agent` now names `servers`: start those not running, restart those whose
        settings changed, stop those no agent names any more; then wait (at most `wait`
        seconds, default the policy's start timeout) until each is ready or failed.
        `files`: per server, the digests of the hive files it runs as the user trusted
        them (see `mcpfiles`): other bytes are a new server, and refused at each start."""
        if self._closed:
            raise RuntimeError("the MCP pool is closed")
        files = files or {}
        wanted = {name: (spec, (name, launch_key(spec, files.get(name))))
                  for name, spec in servers.items()}
        async with self._lock:
            if wanted:
                self._agents[agent] = wanted
            else:
                self._agents.pop(agent, None)
            await self._stop_unused()
            for name, (spec, key) in wanted.items():
                if key not in self._servers:
                    server = ManagedServer(name, spec, hive_root=self.hive_root,
                                           environ=self.environ, log=self._log(name),
                                           policy=self.policy, files=files.get(name))
                    self._servers[key] = server
                    server.start()
        timeout = self.policy.start_timeout if wait is None else wait
        await asyncio.gather(*(self._servers[key].settled(timeout)
                               for _, key in wanted.values() if key in self._servers))

    async def detach(self, agent: str) -> None:
        """`agent` is gone or names no server: stop what no one else names."""
        await self.attach(agent, {}, wait=0)

    def tools_for(self, agent: str) -> list[McpTool]:
        """The tools of `agent`'s ready servers, its allow-lists applied, by server then
        tool name (a stable order: the schemas sit in the prompt's cached prefix)."""
        tools: list[McpTool] = []
        for _name, (spec, key) in sorted(self._agents.get(agent, {}).items()):
            server = self._servers.get(key)
            if server is None or server.status != Status.READY:
                continue
            allowed = None if spec.tools is None else set(spec.tools)
            tools.extend(t for t in server.tools if allowed is None or t.name in allowed
                         or server.own_name(t.name) in allowed)
        return tools

    async def call(self, agent: str, server: str, tool: str,
                   arguments: Mapping[str, Any] | None = None, *,
                   max_chars: int = MAX_CHARS) -> McpResult:
        """Call `server`'s `tool` for `agent`; never raises for the server's problems."""
        entry = self._agents.get(agent, {}).get(server)
        if entry is None:
            return McpResult(f"no MCP server `{server}` is named in the ROM of {agent}",
                             is_error=True)
        spec, key = entry
        running = self._servers.get(key)
        if running is None:
            return McpResult(f"the server `{server}` is not running", is_error=True)
        if spec.tools is not None and not {tool, running.own_name(tool)} & set(spec.tools):
            return McpResult(f"the tool `{server}.{tool}` is not in this agent's allow-list "
                             f"({', '.join(spec.tools) or 'empty'})", is_error=True)
        return await running.call(tool, dict(arguments or {}), limit=spec.timeout,
                                  max_chars=max_chars)

    def states(self) -> list[ServerState]:
        """Every server, by name, with the agents that name it."""
        users: dict[_Key, list[str]] = {}
        for agent, named in self._agents.items():
            for _, key in named.values():
                users.setdefault(key, []).append(agent)
        return sorted((server.state(tuple(sorted(users.get(key, []))))
                       for key, server in self._servers.items()),
                      key=lambda s: (s.name, s.agents))

    async def aclose(self, grace: float = 5.0) -> None:
        """Stop every server (cleanly; killed after `grace` seconds). Final."""
        self._closed = True
        async with self._lock:
            self._agents.clear()
            servers = list(self._servers.values())
            self._servers.clear()
            await asyncio.gather(*(s.stop(grace) for s in servers))

    async def _stop_unused(self) -> None:
        named = {key for servers in self._agents.values() for _, key in servers.values()}
        unused = [key for key in self._servers if key not in named]
        stopping = [self._servers.pop(key) for key in unused]
        await asyncio.gather(*(server.stop(self.grace) for server in stopping))

    def _log(self, name: str) -> ServerLog:
        if name not in self._logs:
            path = None if self.log_dir is None else self.log_dir / f"{name}.log"
            self._logs[name] = ServerLog(name, path)
        return self._logs[name]
