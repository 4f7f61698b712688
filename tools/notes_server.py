"""The example hive's MCP server: the notes in knowledge/, over stdio (no network).

Run by hivemind for the agent whose ROM names it (agents/researcher/ROM.md, `mcp:`),
once you have trusted the hive (`hivemind trust`). Written with the official `mcp`
SDK's server side; its two tools reach the model as `mcp__notes__list_notes` and
`mcp__notes__lookup`.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

NOTES = Path(os.environ.get("NOTES_DIR", "knowledge"))
MAX_CHARS = 4_000

app = MCPServer("notes")


def _notes() -> list[Path]:
    return sorted(p for p in NOTES.glob("*.md") if p.is_file() and not p.is_symlink())


@app.tool()
def list_notes() -> str:
    """The notes of the hive's knowledge folder, one name a line."""
    return "\n".join(p.stem for p in _notes()) or "(no notes)"


@app.tool()
def lookup(topic: str) -> str:
    """The text of the note whose name or first heading matches `topic` (a few words)."""
    words = topic.lower().split()
    for path in _notes():
        text = path.read_text(encoding="utf-8", errors="replace")
        heading = next((ln for ln in text.splitlines() if ln.startswith("#")), "")
        if words and all(w in (path.stem + " " + heading).lower() for w in words):
            return f"{path.as_posix()}:\n\n{text[:MAX_CHARS]}"
    return f"no note about {topic!r}; the notes: {', '.join(p.stem for p in _notes())}"


if __name__ == "__main__":
    app.run()
