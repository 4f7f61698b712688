"""The MCP pool with the stdio test server (tests/mcp_servers/notes.py): how long a
server takes to be ready, a call's round trip, a restart after a crash, a 5 MB result
cut to the cap, and the longest the event loop stood still meanwhile.

    python bench/bench_mcp.py            # 5 starts, 300 calls
    python bench/bench_mcp.py --quick    # 2 starts, 50 calls
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind.mcp.pool import McpPool
from hivemind.mcp.server import RestartPolicy
from hivemind.mcpspec import McpServerSpec

NOTES = Path(__file__).resolve().parents[1] / "tests" / "mcp_servers" / "notes.py"
SPEC = McpServerSpec(command=sys.executable, args=(str(NOTES),))


class Stalls:
    """The longest gap between a 1 ms ticker's wake-ups: how long the loop stood still."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.worst = max(self.worst, now - last)
            last = now

    def __enter__(self) -> Stalls:
        self._task = asyncio.create_task(self._tick())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def timed(n: int, step: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(median ms of `n` runs of `step`, the worst loop stall in ms meanwhile)."""
    times = []
    with Stalls() as stalls:
        for _ in range(n):
            start = time.perf_counter()
            await step()
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, stalls.worst * 1000


async def run(starts: int, calls: int) -> list[tuple[str, int, float, float]]:
    rows = []
    with tempfile.TemporaryDirectory() as root:
        policy = RestartPolicy(first_delay=0.0)
        pool = McpPool(Path(root), {}, policy=policy)

        async def start_stop() -> None:
            await pool.attach("lead", {"notes": SPEC})
            await pool.detach("lead")

        rows.append(("start until ready (and stop)", starts, *await timed(starts, start_stop)))
        await pool.attach("lead", {"notes": SPEC})
        await pool.attach("scout", {"notes": SPEC})
        rows.append(("call (lookup)", calls, *await timed(
            calls, lambda: pool.call("lead", "notes", "lookup", {"q": "bees"}))))

        async def both() -> None:
            await asyncio.gather(pool.call("lead", "notes", "lookup", {"q": "a"}),
                                 pool.call("scout", "notes", "lookup", {"q": "b"}))

        rows.append(("2 agents at once, 1 process", calls, *await timed(calls, both)))

        async def crash_and_back() -> None:
            await pool.call("lead", "notes", "crash", {})
            await pool.call("lead", "notes", "lookup", {"q": "again"})

        rows.append(("crash mid-call, then a call", starts, *await timed(
            starts, crash_and_back)))
        rows.append(("5 MB result cut to 20,000 chars", starts, *await timed(
            starts, lambda: pool.call("lead", "notes", "big", {"n": 5_000_000}))))
        await pool.aclose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    args = parser.parse_args()
    starts, calls = (2, 50) if args.quick else (5, 300)
    rows = asyncio.run(run(starts, calls))
    table = Table(title="MCP pool, stdio test server (notes.py)")
    for column in ("what", "runs", "median ms", "worst loop stall ms"):
        table.add_column(column, justify="left" if column == "what" else "right")
    for what, n, ms, stall in rows:
        table.add_row(what, str(n), f"{ms:,.1f}", f"{stall:,.1f}")
    Console().print(table)


if __name__ == "__main__":
    main()
