"""MCP tools in a hive: what the example server costs a request and a call.

The example hive's server (`tools/notes_server.py`, stdio, written with the `mcp`
SDK) is run by the daemon's own pool (`hivemind.mcp.pool.McpPool`) as the daemon runs
it: the time it takes to start and list its tools; the tokens its tool definitions
add to every request of the agent naming it (counted as the runtime counts the
budget, next to the built-in tools'); and a call's round trip through the pool
(`lookup` of a knowledge note, and a result cut at read_file's cap).

    python bench/bench_mcp_hive.py            # 200 calls of each
    python bench/bench_mcp_hive.py --quick    # 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind.mcp.pool import McpPool
from hivemind.mcpspec import McpServerSpec
from hivemind.memory.tokens import TokenCounter
from hivemind.tools import default_registry
from hivemind.tools.base import MAX_RESULT_CHARS
from hivemind.tools.mcp import McpToolbox

ROOT = Path(__file__).resolve().parents[1]
AGENT = "researcher"


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f} ms"


@dataclass
class Figures:
    start: float  # seconds to start the server and list its tools
    tools: int
    mcp_tokens: int  # of its tool definitions
    builtin_tokens: int  # of the built-in tools' definitions
    lookup: list[float]  # seconds per call
    cut: list[float]


async def measure(hive: Path, calls: int) -> Figures:
    spec = McpServerSpec(command=sys.executable, args=("tools/notes_server.py",),
                         env={"NOTES_DIR": "knowledge"})
    pool = McpPool(hive)
    try:
        t = time.perf_counter()
        await pool.attach(AGENT, {"notes": spec})
        started = time.perf_counter() - t
        box = McpToolbox(pool, MAX_RESULT_CHARS)
        counter = TokenCounter()
        mcp_specs = [s.model_dump() for s in box.specs(AGENT, None)]
        builtin = [s.model_dump() for s in default_registry().specs(None)]
        lookups, cut = [], []
        for _ in range(calls):
            t = time.perf_counter()
            result = await pool.call(AGENT, "notes", "lookup", {"topic": "delegation"},
                                     max_chars=MAX_RESULT_CHARS)
            lookups.append(time.perf_counter() - t)
            assert not result.is_error, result.text
        for _ in range(calls):
            t = time.perf_counter()
            result = await pool.call(AGENT, "notes", "lookup", {"topic": "style"},
                                     max_chars=200)
            cut.append(time.perf_counter() - t)
            assert result.cut, result.text
        return Figures(started, len(mcp_specs), counter.count(json.dumps(mcp_specs)),
                       counter.count(json.dumps(builtin)), lookups, cut)
    finally:
        await pool.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 calls of each")
    args = parser.parse_args()
    calls = 30 if args.quick else 200
    with tempfile.TemporaryDirectory() as tmp:
        hive = Path(tmp)
        for part in ("knowledge", "tools"):
            shutil.copytree(ROOT / part, hive / part)
        m = asyncio.run(measure(hive, calls))
    table = Table(title=f"MCP: the example notes server, {calls} calls of each",
                  title_justify="left")
    table.add_column("what")
    table.add_column("median", justify="right")
    table.add_row("start and list its tools (attach)", f"{m.start * 1000:.0f} ms")
    table.add_row(f"its {m.tools} tool definitions, per request",
                  f"{m.mcp_tokens} tokens (built-in tools: {m.builtin_tokens})")
    table.add_row("call: lookup of a note (~1 KB)", _ms(m.lookup))
    table.add_row("call: a result cut at 200 characters", _ms(m.cut))
    Console().print(table)


if __name__ == "__main__":
    main()
