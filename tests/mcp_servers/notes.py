"""A small stdio MCP server for the pool's tests (the SDK's server side).

Its tools: `lookup` answers, `env` reads a variable of its environment, `big` returns
n characters, `grow` adds a tool, `pid` says its process id, `spawn` starts a child,
`escape` one in a session of its own,
`fail` raises, `refuse` errs, `crash` exits mid-call, `stall` blocks its own event loop (a stuck
server), `slow` sleeps without blocking it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

app = MCPServer("notes")


@app.tool()
def lookup(q: str) -> str:
    """Look a note up by its title."""
    return f"note about {q}"


@app.tool()
def env(name: str) -> str:
    """A variable of the server's environment."""
    return os.environ.get(name, "<unset>")


@app.tool()
def big(n: int) -> str:
    """n characters."""
    return "x" * n


@app.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@app.tool()
def spawn() -> str:
    """Starts a process of its own (as `npx` starts `node`); says its pid."""
    child = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(child.pid)


@app.tool()
def escape() -> str:
    """Starts a daemon of its own, in a session of its own (out of the server's group)."""
    child = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    return str(child.pid)


@app.tool()
def cwd() -> str:
    """The server's working folder."""
    return os.getcwd()


@app.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool `name` and tells the client its tools changed."""
    app.add_tool(lambda: f"I am {name}", name=name, description=f"The tool {name}.")
    await ctx.session.send_tool_list_changed()
    await ctx.info(f"grew {name}")
    return "grown"


@app.tool()
def fail() -> str:
    """Always raises."""
    raise ValueError("no such note")


@app.tool()
def refuse(n: int) -> str:
    """Answers with a protocol error whose message is n characters long."""
    raise MCPError(code=INVALID_PARAMS, message="r" * n)


@app.tool()
def crash() -> str:
    """Exits mid-call."""
    print("notes: the index is corrupt", file=sys.stderr, flush=True)
    os._exit(1)


@app.tool()
async def stall(mark: str = "") -> str:
    """Blocks the server's event loop: it answers nothing any more (nor sees its stdin
    close). `mark`: a file it creates first."""
    if mark:
        open(mark, "w").close()
    time.sleep(3600)
    return "never"


@app.tool()
async def slow(seconds: float) -> str:
    """Sleeps without blocking the server."""
    await anyio.sleep(seconds)
    return "slept"


if __name__ == "__main__":
    time.sleep(float(os.environ.get("NOTES_SLOW_START", "0")))
    broken = os.environ.get("NOTES_BROKEN_WHILE")  # a file: while it is there
    if os.environ.get("NOTES_CRASH_AT_START") or (broken and os.path.exists(broken)):
        print("notes: cannot open the index", file=sys.stderr, flush=True)
        sys.exit(3)
    app.run()
