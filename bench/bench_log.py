"""`hivemind log` on a big hive: time and bytes read to show the newest records of every
agent, interleaved, whatever the size of their audit logs.

Each agent's log is a sparse file of `--gigabytes` (a hole: costs no disk) followed by
`--records` real cycle records, as months of running leave it. Rows: the default view
(`log`, the last 50 records of all), `log --since 10m`, `log AGENT`, the first look of
`log -f`, and, for scale, reading each log's tail whole (what a reader without a
backward reader does, up to AUDIT_TAIL_BYTES a log).

    python bench/bench_log.py            # 50 agents, 1,000 records each, 4 GB holes
    python bench/bench_log.py --quick    # 10 agents, 300 records each
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind.agent.audit import AuditLog
from hivemind.agent.audittail import read_last, read_new
from hivemind.cli.log_cmd import merged
from hivemind.cli.logview import LogView
from hivemind.hive.layout import Hive


def cycle_record(agent: str, n: int, at: datetime) -> dict[str, object]:
    """A cycle record as a real run writes it: three tool calls, text, effects."""
    task = f"t{n % 97:03d}"
    return {
        "event": "cycle", "at": at.isoformat(), "cycle": n, "agent": agent,
        "provider": "anthropic", "tasks": [task], "mail": [],
        "kept": [{"id": f"knowledge/note-{i}.md", "tokens": 120} for i in range(6)],
        "dropped": [], "context_tokens": 4200,
        "usage": {"input_tokens": 900, "output_tokens": 300, "cache_write_tokens": 0,
                  "cache_read_tokens": 3000},
        "cost": 0.0051,
        "tool_calls": [
            {"name": "read_file", "input": {"path": f"workspace/{task}.md"},
             "result": "x" * 300, "error": False},
            {"name": "write_file", "input": {"path": f"workspace/{task}.md",
                                             "content": "y" * 400},
             "result": f"wrote workspace/{task}.md (400 bytes)", "error": False},
            {"name": "complete_task", "input": {"task_id": task, "result": "done " * 20},
             "result": f"task {task} is done", "error": False},
        ],
        "text": "I read the notes, wrote the summary and completed the task. " * 3,
        "effects": {"messages_sent": [], "files_written": [f"workspace/{task}.md"],
                    "tasks_created": [], "tasks_completed": [task], "tasks_failed": [],
                    "memories": [], "waits": {}, "refusals": [], "delegated": {}},
        "followup": [], "held": {}, "error": None, "stop_reason": "end_turn",
        "ended": None, "duration_ms": 5123.4, "model_ms": 5000.1, "tools_ms": 12.3,
    }  # fmt: skip


def build(root: Path, agents: int, records: int, hole: int) -> tuple[Hive, list[str]]:
    hive = Hive(root / "hive").ensure()
    names = [f"agent{i:02d}" for i in range(agents)]
    now = datetime.now(UTC)
    for a, name in enumerate(names):
        path = hive.audit_path(name)
        with open(path, "wb") as fh:
            fh.truncate(hole)
            fh.seek(hole)
            fh.write(b"\n")
            for n in range(records):
                at = now - timedelta(seconds=(records - n) * 60 - a)  # a cycle a minute
                fh.write(json.dumps(cycle_record(name, n, at)).encode() + b"\n")
    return hive, names


def rchar() -> int:
    with open("/proc/self/io", encoding="ascii") as f:
        return int(next(x for x in f if x.startswith("rchar:")).split()[1])


def measure(fn: Callable[[], int], repeat: int) -> tuple[float, int, int]:
    """(median ms, bytes read, lines printed) of `fn`."""
    times, read, lines = [], 0, 0
    for _ in range(repeat):
        before, start = rchar(), time.perf_counter()
        lines = fn()
        times.append((time.perf_counter() - start) * 1000)
        read = rchar() - before
    return statistics.median(times), read, lines


def show(hive: Hive, names: list[str], count: int | None,
         since: datetime | None = None) -> int:
    """What `hivemind log` does: read the ends, merge by time, format; the lines made."""
    per = {n: read_last(hive.audit_path(n), count, since).records for n in names}
    entries = list(merged(per))
    if count is not None:
        entries = entries[-count:]
    view, console = LogView(max(len(n) for n in names)), Console(file=io.StringIO(), width=200)
    shown = 0
    for name, rec in entries:
        for line in view.lines(name, rec):
            console.print(line, soft_wrap=True)
            shown += 1
    return shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--agents", type=int, default=None)
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--gigabytes", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # "only its last ... are read": the point of the last row
    agents = args.agents or (10 if args.quick else 50)
    records = args.records or (300 if args.quick else 1000)
    hole = int(args.gigabytes * 2**30)
    with tempfile.TemporaryDirectory(prefix="bench-log-") as tmp:
        hive, names = build(Path(tmp), agents, records, hole)
        size = os.path.getsize(hive.audit_path(names[0]))
        since = datetime.now(UTC) - timedelta(minutes=10)
        positions = {n: read_last(hive.audit_path(n), 0).at for n in names}
        rows = [
            ("log (last 50 of all)", lambda: show(hive, names, 50)),
            ("log --since 10m", lambda: show(hive, names, None, since)),
            ("log AGENT (last 50)", lambda: show(hive, names[:1], 50)),
            ("log -f: one look, nothing new",
             lambda: sum(len(read_new(hive.audit_path(n), positions[n]).records)
                         for n in names)),
            ("for scale: 5 logs' tails read whole",
             lambda: sum(1 for n in names[:5] for _ in AuditLog(hive.audit_path(n)).records())),
        ]
        table = Table(title=f"hivemind log: {agents} agents, logs of {size / 2**30:.1f} GB "
                      f"each ({records} records after a hole)")
        for column in ("what", "median ms", "bytes read", "lines / records"):
            table.add_column(column, justify="left" if column == "what" else "right")
        for label, fn in rows:
            ms, read, lines = measure(fn, 1 if label.startswith("for scale") else args.repeat)
            table.add_row(label, f"{ms:,.1f}", f"{read:,}", f"{lines:,}")
        Console().print(table)


if __name__ == "__main__":
    main()
