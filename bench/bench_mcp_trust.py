"""What the trust of an MCP server's hive files costs, and what vetting a hostile tool
list costs: hashing a script the first time, the check before each cycle (hashes
cached by stat), the daemon's stat-only look at each rescan; vetting 5000 tools.

    python bench/bench_mcp_trust.py            # 2000 checks each
    python bench/bench_mcp_trust.py --quick    # 200
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind import mcpfiles
from hivemind.mcp.api import McpTool
from hivemind.mcp.vetting import vet_tools
from hivemind.mcpspec import McpServerSpec


def median_us(n: int, step: Callable[[], object]) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 checks each")
    n = 200 if parser.parse_args().quick else 2000
    table = Table(title=f"MCP trust of hive files (median of {n})")
    for column in ("script", "first hash", "check per cycle", "stat look per rescan"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "tools").mkdir()
        for helper in range(10):  # modules beside it: listed and hashed too
            (root / "tools" / f"helper{helper}.py").write_bytes(os.urandom(4096))
        for size in (10_000, 1_000_000, 16_000_000):
            script = root / "tools" / f"server{size}.py"
            script.write_bytes(os.urandom(size))
            spec = McpServerSpec(command="python3", args=(str(script.relative_to(root)),))
            start = time.perf_counter()
            files = mcpfiles.server_files(spec, root)
            first = (time.perf_counter() - start) * 1e3
            cached = median_us(n, lambda s=spec: mcpfiles.server_files(s, root))
            look = median_us(n, lambda d=files.digests: mcpfiles.look_unchanged(root, d))
            table.add_row(f"{size / 1e6:g} MB", f"{first:.1f} ms", f"{cached:.0f} µs",
                          f"{look:.0f} µs")
            script.unlink()
    tools = [McpTool("h", f"t{i:04d}", "a tool", {"type": "object", "properties": {
        "q": {"type": "string"}}}) for i in range(5000)]
    start = time.perf_counter()
    vet_tools(tools)
    first_vet = (time.perf_counter() - start) * 1e3
    again = median_us(max(n // 20, 10), lambda: vet_tools(tools)) / 1e3
    console = Console()
    console.print(table)
    console.print(f"vetting a list of 5000 tools: {first_vet:.1f} ms the first time, "
                  f"{again:.1f} ms again (schemas checked once)")


if __name__ == "__main__":
    main()
