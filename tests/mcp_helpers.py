"""What the MCP pool's tests share: the test servers, a quick restart policy, and a
way to tell whether a process still runs."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from hivemind.mcp.server import RestartPolicy
from hivemind.mcpspec import McpServerSpec

SERVERS = Path(__file__).parent / "mcp_servers"
QUICK = RestartPolicy(first_delay=0.05, max_delay=0.2, crashes=3, window=120.0,
                      start_timeout=60.0, ping=3.0)


def notes_spec(**settings: Any) -> McpServerSpec:
    """The stdio test server `notes` (tests/mcp_servers/notes.py)."""
    return McpServerSpec(command=sys.executable, args=(str(SERVERS / "notes.py"),),
                         **settings)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def gone(pid: int, within: float = 30.0) -> bool:
    """Whether `pid` stops running within `within` seconds (polled: the machine is busy)."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
