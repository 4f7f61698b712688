"""A small streamable-HTTP MCP server for the pool's tests: `search.py PORT`.

Its tools: `find` answers, `header` says a request header it got, `die` ends the
whole server mid-call (the endpoint fails).
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("search")


@app.tool()
def find(q: str) -> str:
    """Find pages about q."""
    return f"3 pages about {q}"


@app.tool()
def header(name: str, ctx: Context) -> str:
    """A header of the HTTP request that called this tool."""
    return (ctx.headers or {}).get(name.lower(), "<none>")


@app.tool()
def die() -> str:
    """Ends the server mid-call."""
    os._exit(1)


if __name__ == "__main__":
    app.settings.log_level = "WARNING"
    app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
