"""Prompt size: the tokens of the request an agent of the example hive sends, by part.

The example hive is what `hivemind init` makes (one agent, `assistant`, and a
knowledge note). Two requests, each built by the cycle's own code
(`agent/inspect.py`'s `request_of`, what `hivemind inspect AGENT --request` shows):
an idle agent with one mail ("Hello"), and a typical task. Tokens are counted with
the runtime's own counter (tiktoken cl100k, what the context budget is counted in);
the tools as the JSON the SDK sends. Then a run of the same hive with the offline
provider: the share of each cycle's request a prompt cache could serve (the prefix
it has in common with the request before it).

    python bench/bench_prompt.py            # 12 tasks and 6 mails for the run
    python bench/bench_prompt.py --quick    # 4 tasks and 2 mails
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind.agent.inspect import request_of
from hivemind.agent.report import CycleReport
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.scaffold import init_hive
from hivemind.llm.offline import OfflineProvider
from hivemind.memory.tokens import TokenCounter

AGENT = "assistant"
TASK = """\
---
id: summarise-conventions
title: Summarise the hive's conventions
priority: medium
---
# Summarise the hive's conventions

Read the notes in `knowledge/` and write a one-page summary of the hive's
conventions to `workspace/summarise-conventions/summary.md`: where outputs go,
how tasks are named, and how decisions are recorded. Finish with `complete_task`,
naming the file.
"""

# Measured with this script at 5863453, before the leaner prompt (cl100k tokens).
BEFORE: dict[str, dict[str, int]] = {
    "idle": {"system": 661, "tools": 1597, "knowledge": 172, "message": 134, "status": 84,
             "total": 2650},
    "task": {"system": 661, "tools": 1597, "knowledge": 172, "task": 183, "status": 84,
             "total": 2699},
}
BEFORE_PREFIX = "82% (min 76%)"  # the full run, at 5863453
TARGETS = {"idle": 1800, "task": 2400}
PREFIX_TARGET = 0.80


def example_hive(root: Path) -> Hive:
    """A fresh `hivemind init` hive."""
    return init_hive(root)


def parts(request: dict[str, Any], counter: TokenCounter) -> dict[str, int]:
    """Tokens per part of a request: system, tools, each context entry type, total."""
    tools = json.dumps(request["tool_specs"], separators=(",", ":"), ensure_ascii=False)
    out = {"system": counter.count(request["system"]), "tools": counter.count(tools)}
    for entry in json.loads(request["context"]):
        kind = entry["metadata"]["type"]
        text = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
        out[kind] = out.get(kind, 0) + counter.count(text)
    out["total"] = out["system"] + out["tools"] + counter.count(request["context"])
    return out


def measure_requests(base: Path, counter: TokenCounter) -> dict[str, dict[str, int]]:
    idle = example_hive(base / "idle")
    PostOffice(idle).send(HUMAN, AGENT, "", "Hello")
    working = example_hive(base / "task")
    (working.tasks_dir / "summarise-conventions.md").write_text(TASK)
    return {
        "idle": parts(asyncio.run(request_of(idle, AGENT)), counter),
        "task": parts(asyncio.run(request_of(working, AGENT)), counter),
    }


def prefix_reuse(base: Path, tasks: int, mails: int) -> list[float]:
    """The cacheable share of each cycle's request (after the first), over a run of the
    example hive given its tasks one after another (the first `mails` with a mail)."""
    hive = example_hive(base / "run")
    config = load_hive_config(hive)
    config.daemon.settle_time = 0.0
    reports: list[CycleReport] = []
    daemon = Daemon(hive, config, OfflineProvider(), RunOptions(), on_cycle=reports.append)

    async def run() -> None:
        running = asyncio.create_task(daemon.run())
        for i in range(tasks):
            if i < mails:
                PostOffice(hive).send(HUMAN, AGENT, f"question {i}", "Where do outputs go?")
            (hive.tasks_dir / f"t{i}.md").write_text(
                f"# Summarise note {i}\n\nWrite workspace/t{i}.md: what knowledge/ says.\n")
            done = hive.done_dir / f"t{i}.md"
            for _ in range(1000):
                if done.is_file() or running.done():
                    break
                await asyncio.sleep(0.01)
        daemon.stop("bench done")
        await running

    asyncio.run(run())
    return [r.prefix_reuse for r in reports if r.prefix_reuse is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 tasks and 2 mails for the run")
    args = parser.parse_args()
    counter = TokenCounter()
    with tempfile.TemporaryDirectory(prefix="bench-prompt-") as tmp:
        now = measure_requests(Path(tmp), counter)
        reuse = prefix_reuse(Path(tmp), 4 if args.quick else 12, 2 if args.quick else 6)

    table = Table(title=f"request tokens by part (cl100k), example hive, agent {AGENT}")
    table.add_column("part")
    for name in ("idle", "task"):
        table.add_column(f"{name}: before", justify="right")
        table.add_column(f"{name}: now", justify="right")
        table.add_column(f"{name}: target", justify="right")
    rows = ["system", "tools"]
    rows += sorted({k for r in (*now.values(), *BEFORE.values()) for k in r} - {*rows, "total"})
    for row in [*rows, "total"]:
        cells = []
        for name in ("idle", "task"):
            before, got = BEFORE[name].get(row), now[name].get(row)
            target = f"≤ {TARGETS[name]:,}" if row == "total" else ""
            cells += [f"{before:,}" if before else "–", f"{got:,}" if got else "–", target]
        table.add_row(f"context: {row}" if row not in ("system", "tools", "total") else row,
                      *cells)
    shown = f"{statistics.median(reuse):.0%} (min {min(reuse):.0%})" if reuse else "n/a"
    table.add_row("cacheable prefix, median over cycles", BEFORE_PREFIX, shown,
                  f"≥ {PREFIX_TARGET:.0%}", "", f"{len(reuse)} cycles", "")
    Console(width=130).print(table)


if __name__ == "__main__":
    main()
