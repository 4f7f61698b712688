"""What the MCP pool offers the rest of hivemind (the pool itself is in `pool`).

The contract:

    pool = McpPool(hive_root, environ=os.environ)      # one per daemon (the lead)
    await pool.attach("lead", rom.mcp)   # this agent's servers now (a later call with
                                         # a changed block restarts what changed and
                                         # stops what no agent names any more)
    pool.tools_for("lead")               # list[McpTool]: ready servers' tools, the
                                         # ROM's allow-list applied, in a stable order
    await pool.call("lead", "notes", "lookup", {"q": "x"}, max_chars=20_000)
                                         # McpResult; never raises for the server's
                                         # problems (crash, hang, error): is_error=True
    pool.states()                        # list[ServerState] for status/top
    await pool.detach("lead")            # the agent is gone or names no server
    await pool.aclose(grace=5.0)         # stop every server; kill after the grace

Nothing starts before `attach`; the caller decides trust (an untrusted hive's servers
are never attached).

What the pool adds: `McpPool(..., log_dir=...)` keeps each server's stderr (and the
SDK's complaints about it) in `<log_dir>/<name>.log`, capped; `policy=RestartPolicy(...)`
sets the back-off and when a server is failed. `attach` returns once each of the
agent's servers is ready or failed (at most `wait`, default the 30 s start timeout).
Agents whose blocks differ only in `tools` or `timeout` share one process; a server
started in the daemon dies with it (kill -9 included) if the pool's event loop runs in
a thread that lives as long as the daemon (its main thread).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hivemind.mcpspec import tool_name


@dataclass(frozen=True)
class McpTool:
    """One tool a server offers, as the model is shown it."""

    server: str
    name: str
    """The server's own name for it, unless the Messages API would refuse that (see
    `names`): then a safe one, which `McpPool.call` takes and maps back."""
    description: str
    input_schema: dict[str, Any] = field(hash=False, compare=False)

    @property
    def full_name(self) -> str:
        """`mcp__<server>__<tool>`, the name the model calls it by."""
        return tool_name(self.server, self.name)


@dataclass(frozen=True)
class McpResult:
    """A call's outcome as the model gets it: text, and whether it is an error."""

    text: str
    is_error: bool = False
    cut: int = 0
    """Characters left out to keep the result within the cap (0: whole)."""


class ServerStatus(StrEnum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"  # crashed; waiting out its back-off
    FAILED = "failed"  # crashed too often; its agents go on without it
    STOPPED = "stopped"


@dataclass(frozen=True)
class ServerState:
    """One server as `hivemind status` and `hivemind top` show it."""

    name: str
    status: ServerStatus
    transport: str  # "stdio" or "http"
    tools: int  # tools it offers (before any allow-list)
    agents: tuple[str, ...]
    pid: int | None = None
    restarts: int = 0
    error: str | None = None
    """Its last problem, one line (why it failed, what it printed last on stderr)."""
