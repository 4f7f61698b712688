"""`hivemind top`: how long one snapshot of a big hive takes (target: under 1 s).

Builds a hive of 50 agents and 10 000 tasks (pending, held, done, failed, rejected),
each agent with an audit log of a day's cycles, and times `HiveReader.snapshot()`,
what `top` runs in a worker thread every second: the first one (it reads each audit
log's end), then refreshes of a busy hive (each agent one new cycle and a task done
between two refreshes: the folders are listed again), then of a quiet one (folders
unchanged for `RACY` s are not). A status.json says a daemon runs.

    python bench/bench_top.py            # 15 refreshes of each kind
    python bench/bench_top.py --quick    # 5 of each, smaller audit logs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind.cli.top.snapshot import HiveReader
from hivemind.cli.top.taskfolders import RACY
from hivemind.hive.layout import Hive

AGENTS = 50
TASKS = {"pending": 2_000, "active": 100, "done": 6_000, "failed": 1_500, "rejected": 400}


def _task(tid: str, extra: str = "") -> str:
    return (f"---\nid: {tid}\ntitle: Task {tid}\npriority: medium\n{extra}---\n"
            f"# Task {tid}\n\nSummarise the notes of {tid} in five lines.\n")


def _cycle(agent: str, n: int, at: str) -> str:
    calls = [{"name": "read_file", "input": {"path": f"workspace/{agent}-{n}.md"},
              "result": "x" * 600, "error": False},
             {"name": "complete_task", "input": {"task_id": f"{agent}-{n}", "result": "ok"},
              "result": f"task {agent}-{n} is done", "error": False}]
    return json.dumps({
        "event": "cycle", "at": at, "cycle": n, "agent": agent, "tasks": [f"{agent}-{n}"],
        "mail": [], "usage": {"input_tokens": 1200, "output_tokens": 300,
                              "cache_write_tokens": 0, "cache_read_tokens": 2000},
        "cost": 0.0042, "tool_calls": calls, "text": f"Done with {agent}-{n}.\nAll good.",
        "effects": {"tasks_completed": [f"{agent}-{n}"], "tasks_failed": []},
    })


def build(root: Path, cycles: int) -> Hive:
    hive = Hive(root).ensure()
    names = [f"agent{i:02d}" for i in range(AGENTS)]
    for name in names:
        rom = hive.rom_path(name)
        rom.parent.mkdir(parents=True, exist_ok=True)
        rom.write_text(f"---\nrole: worker {name}\n---\nDo the tasks.\n")
    n = 0
    for state, count in TASKS.items():
        for i in range(count):
            tid = f"{state}-{i:05d}"
            if state == "pending":
                folder = hive.tasks_dir
            elif state == "active":
                folder = hive.active_dir_for(names[i % AGENTS])
            else:
                folder = {"done": hive.done_dir, "failed": hive.failed_dir,
                          "rejected": hive.rejected_dir}[state]
            folder.mkdir(parents=True, exist_ok=True)
            extra = "status: failed\nattempts: 3\n" if state == "failed" else ""
            (folder / f"{tid}.md").write_text(_task(tid, extra) + (
                "\n## Attempt 3 failed\n\nthe tool kept failing\n" if extra else ""))
            if state == "rejected":
                (folder / f"{tid}.md.reason").write_text("line 2: no closing ---\n")
            n += 1
    now = datetime.now(UTC).isoformat()
    for name in names:
        lines = [_cycle(name, c, now) for c in range(1, cycles + 1)]
        hive.audit_path(name).write_text("\n".join(lines) + "\n")
    hive.status_file.write_text(json.dumps({
        "pid": os.getpid(), "running": True, "provider": "anthropic", "agents": {
            name: {"state": "idle", "tokens_today": 1000 * cycles} for name in names}}))
    return hive


def _median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 refreshes, smaller logs")
    parser.add_argument("--dir", type=Path, default=None, help="where to build the hive")
    args = parser.parse_args()
    rounds = 5 if args.quick else 15
    cycles = 200 if args.quick else 1_000
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        started = time.perf_counter()
        hive = build(Path(tmp) / "hive", cycles)
        built = time.perf_counter() - started
        log_mb = sum(hive.audit_path(f"agent{i:02d}").stat().st_size
                     for i in range(AGENTS)) / 2**20
        reader = HiveReader(hive)
        t = time.perf_counter()
        snap = reader.snapshot()
        first = time.perf_counter() - t
        growing, still = [], []
        for r in range(rounds):
            # A busy hive: every agent ends a cycle, a task moves from tasks/ to done/.
            now = datetime.now(UTC).isoformat()
            for i in range(AGENTS):
                with hive.audit_path(f"agent{i:02d}").open("a") as fh:
                    fh.write(_cycle(f"agent{i:02d}", cycles + r + 1, now) + "\n")
            moved = f"pending-{r:05d}.md"
            os.rename(hive.tasks_dir / moved, hive.done_dir / moved)
            t = time.perf_counter()
            reader.snapshot()
            growing.append(time.perf_counter() - t)
        time.sleep(RACY + 0.1)  # folders unchanged that long are not listed again
        for _ in range(rounds):
            t = time.perf_counter()
            snap = reader.snapshot()
            still.append(time.perf_counter() - t)
    assert sum(snap.counts.values()) == sum(TASKS.values()), snap.counts
    table = Table(title=f"hivemind top: one snapshot of {AGENTS} agents, "
                        f"{sum(TASKS.values()):,} tasks, {log_mb:.0f} MB of audit logs "
                        f"(built in {built:.1f} s)", title_justify="left")
    table.add_column("snapshot")
    table.add_column("median", justify="right")
    table.add_column("max", justify="right")
    table.add_column("target", justify="right")
    table.add_row("first (each log's end read)", _median_ms([first]), _median_ms([first]),
                  "< 1 s")
    table.add_row(f"refresh, 50 new cycles, a task done (x{rounds})", _median_ms(growing),
                  f"{max(growing) * 1000:.0f} ms", "< 1 s")
    table.add_row(f"refresh, nothing new for {RACY:g} s (x{rounds})", _median_ms(still),
                  f"{max(still) * 1000:.0f} ms", "< 1 s")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
