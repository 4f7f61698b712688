"""The MCP servers of a running daemon, as `hivemind status` shows them."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from hivemind.cli.common import console
from hivemind.daemon.status_file import McpServerStatus

_STYLE = {"ready": "green", "starting": "cyan", "restarting": "yellow", "failed": "red"}


def servers_brief(raw: Any) -> str:
    """`MCP: notes ready (3 tools), web failed: refused`: a daemon's servers in one line
    (`raw`: status.json's `mcp_servers`; "" if none), for `hivemind top`."""
    parts = []
    for item in raw if isinstance(raw, list) else ():
        try:
            s = McpServerStatus.model_validate(item)
        except ValidationError:
            continue
        part = f"{s.name} {s.status}"
        if s.status == "ready":
            part += f" ({s.tools} tool{'s' if s.tools != 1 else ''})"
        elif s.error:
            part += f": {s.error[:80]}"
        parts.append(part)
    return "MCP: " + ", ".join(parts) if parts else ""


def print_mcp_servers(servers: list[McpServerStatus]) -> None:
    """A table of the servers: state, tools, pid, agents, and why one failed."""
    if not servers:
        return
    table = Table(title="MCP servers", title_justify="left")
    for column in ("server", "state", "tools", "pid", "agents", "problem"):
        table.add_column(column, justify="right" if column in ("tools", "pid") else "left")
    for s in servers:
        style = _STYLE.get(s.status, "")
        state = f"[{style}]{escape(s.status)}[/]" if style else escape(s.status)
        if s.restarts:
            state += f" ({s.restarts} restarts)"
        table.add_row(escape(s.name), state, str(s.tools), str(s.pid or ""),
                      escape(", ".join(s.agents)), f"[red]{escape(s.error or '')}[/]")
    console.print(table)
