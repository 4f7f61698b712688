"""Routing: what deciding who takes a pending task costs, per task.

Router: candidates per second for tasks assigned to an agent, assigned to a name the
hive has no agent for, and unassigned (matched by skills). Dispatch: one dispatch of
a board of N pending tasks (a quarter of each assignment kind, the rest by skills)
to 20 agents, every task claimed or held back; tasks per second.

    python bench/bench_routing.py            # 10 000 pending tasks, median of 5
    python bench/bench_routing.py --quick    # 2 000 pending tasks, median of 3
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind.daemon.dispatch import Dispatcher
from hivemind.hive.layout import Hive
from hivemind.hive.models import Task
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.routing import Router
from hivemind.settings import AgentConfig

AGENTS = 20
SKILLS = ["python", "docs", "billing", "ops", "rust", "sql", "design", "tests"]


def _agents() -> list[AgentConfig]:
    return [AgentConfig(name=f"a{i}", skills=[SKILLS[i % len(SKILLS)]],
                        accepts_unassigned=i % 2 == 0) for i in range(AGENTS)]


def _front(i: int) -> str:
    kind = i % 4
    if kind == 0:
        return f"assignee: a{i % AGENTS}\n"
    if kind == 1:
        return f"assignee: ghost{i % 7}\n"  # no such agent
    return ""


def _task(i: int) -> Task:
    front = _front(i)
    assignee = front.split(": ", 1)[1].strip() if front else None
    return Task(id=f"t{i}", title=f"Task {i} about {SKILLS[i % len(SKILLS)]}",
                body=f"Do the {SKILLS[(i * 3) % len(SKILLS)]} part of it.", assignee=assignee)


def bench_router(n: int, kind: int) -> float:
    """Router.candidates per second for tasks of one assignment kind."""
    router = Router(_agents())
    tasks = [_task(i) for i in range(kind, kind + 4 * n, 4)]
    t0 = time.perf_counter()
    for task in tasks:
        router.candidates(task)
    return len(tasks) / (time.perf_counter() - t0)


def bench_dispatch(base: Path, n: int) -> float:
    """Tasks per second through one dispatch of n pending tasks (claimed or held)."""
    hive = Hive(base / f"hive-{time.perf_counter_ns()}").ensure()
    for i in range(n):
        (hive.tasks_dir / f"t{i}.md").write_text(
            f"---\n{_front(i)}---\n# Task {i} about {SKILLS[i % len(SKILLS)]}\n\n"
            f"Do the {SKILLS[(i * 3) % len(SKILLS)]} part of it.\n" if _front(i) else
            f"# Task {i} about {SKILLS[i % len(SKILLS)]}\n\nDo the "
            f"{SKILLS[(i * 3) % len(SKILLS)]} part of it.\n")
    for a in _agents():
        hive.rom_path(a.name).parent.mkdir(parents=True, exist_ok=True)
        hive.rom_path(a.name).write_text("---\nrole: r\n---\nx\n")
    board = TaskBoard(hive, settle_time=0, fsync=False)
    old = time.time() - 60
    for path in hive.tasks_dir.glob("*.md"):
        os.utime(path, (old, old))  # settled
    board.refresh_pending()
    dispatcher = Dispatcher(board, max_active=n)
    agents = {a.name: a for a in _agents()}
    t0 = time.perf_counter()
    dispatcher.dispatch(agents, changed=[])
    return n / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 000 tasks, median of 3")
    args = parser.parse_args()
    logging.getLogger("hivemind").setLevel(logging.ERROR)  # the "waits for ghost" lines
    n, runs = (2_000, 3) if args.quick else (10_000, 5)
    table = Table(title=f"routing ({'quick, ' if args.quick else ''}{n:,} tasks, "
                  f"{AGENTS} agents, median of {runs})", title_justify="left")
    table.add_column("measure")
    table.add_column("result", justify="right")
    for kind, label in ((0, "assigned to an agent"), (1, "assigned to no agent of the hive"),
                        (2, "unassigned (skills)")):
        rate = statistics.median(bench_router(n, kind) for _ in range(runs))
        table.add_row(f"Router.candidates, {label}", f"{rate:,.0f}/s")
    with tempfile.TemporaryDirectory() as tmp:
        rate = statistics.median(bench_dispatch(Path(tmp), n) for _ in range(runs))
    table.add_row("dispatch of the whole pending set (claimed or held)", f"{rate:,.0f} tasks/s")
    Console().print(table)


if __name__ == "__main__":
    main()
