"""Held work with a model that has real habits: model calls and tokens per task.

A mixed-habit run of 36 tasks on 3 agents through the real anthropic SDK, against the
scripted model of tests/model_habits.py on a fake Messages API on 127.0.0.1 (no
network, no key). The mix (task id prefix = habit):

    12 plain     completes the task at once
     9 text      answers in plain text first; completes it when asked again
     6 read      needs 12 distinct file reads first (4 a round, in parallel)
     6 ask       asks its partner agent a question; completes on the answer
     3 pingpong  hands the work to its partner with create_task, for ever

Targets: every task done, at most 2.5 model calls per task (per task ended, the
delegated ones included; the figure per task dropped is printed too), delegation
loops cut within their limits.

    python bench/bench_habits.py            # 36 tasks
    python bench/bench_habits.py --quick    # the same mix, 30 tasks
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console
from rich.table import Table

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.config import load_hive_config
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.settings import AgentSettings
from tests.fake_anthropic import FakeAnthropic
from tests.model_habits import HabitModel, data_files, habit_of

AGENTS = {"ann": "bob", "bob": "cid", "cid": "ann"}  # agent → its partner
MIX = {"plain": 12, "text": 9, "read": 6, "ask": 6, "pingpong": 3}
QUICK_MIX = {"plain": 10, "text": 8, "read": 5, "ask": 5, "pingpong": 2}
TARGET_CALLS = 2.5


def make_hive(root: Path, mix: dict[str, int]) -> Hive:
    hive = Hive(root).ensure()
    for name in AGENTS:
        rom = hive.rom_path(name)
        rom.parent.mkdir(parents=True)
        rom.write_text(f"---\nrole: analyst {name}\n---\nYou work out figures.\n")
    data_files(hive.root)
    for habit, count in mix.items():
        for i in range(count):
            (hive.tasks_dir / f"{habit}-{i + 1}.md").write_text(
                f"# {habit}-{i + 1}\n\nWork out the figure for item {i + 1}.\n")
    return hive


def run(hive: Hive, model: HabitModel) -> tuple[Daemon, float]:
    config = load_hive_config(hive)
    config.daemon.settle_time = 0.0
    config.daemon.rescan_interval = 0.2
    with FakeAnthropic() as api:
        api.responder = model
        provider = AnthropicProvider(api_key="bench", base_url=api.base_url, timeout=10,
                                     max_retries=0)
        daemon = Daemon(hive, config, provider,
                        RunOptions(until_idle=True, idle_settle=0.2, max_cycles=1000))
        started = time.perf_counter()
        asyncio.run(daemon.run())
        return daemon, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 tasks instead of 36")
    args = parser.parse_args()
    mix = QUICK_MIX if args.quick else MIX
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        hive = make_hive(Path(tmp) / "hive", mix)
        model = HabitModel(partners=AGENTS, reads_needed=12, reads_per_round=4)
        daemon, seconds = run(hive, model)
        done = {p.stem: read_task(p) for p in hive.done_dir.glob("*.md")}
        failed = {p.stem: read_task(p) for p in hive.failed_dir.glob("*.md")}
        left = [hive.relative(p) for p in hive.tasks_dir.rglob("*.md")
                if p.parent not in (hive.done_dir, hive.failed_dir)]
        refusals = _refusals(hive)

    # Each call is shared among the habits of the tasks it was shown (mail only: "mail").
    calls: Counter[str] = Counter()
    for held in model.held:
        for tid in held:
            calls[habit_of(tid)] += 1 / len(held)
        if not held:
            calls["mail"] += 1
    tokens = daemon.totals.usage.total_input + daemon.totals.usage.output_tokens
    ended = {**done, **failed}
    table = Table(title=f"Held work, {sum(mix.values())} tasks dropped on 3 agents "
                        f"({seconds:.1f} s)", title_justify="left")
    for column in ("habit", "tasks ended", "done", "failed", "model calls", "calls/task"):
        table.add_column(column, justify="left" if column == "habit" else "right")
    for habit in [*mix, "mail"]:
        n = sum(habit_of(t) == habit for t in ended)
        if not n and not calls[habit]:
            continue
        table.add_row(habit, str(n), str(sum(habit_of(t) == habit for t in done)),
                      str(sum(habit_of(t) == habit for t in failed)), f"{calls[habit]:.1f}",
                      f"{calls[habit] / n:.2f}" if n else "-")
    total_calls = sum(model.calls.values())
    per_task = total_calls / max(1, len(ended))
    table.add_row("all", str(len(ended)), str(len(done)), str(len(failed)), str(total_calls),
                  f"{per_task:.2f}", style="bold")
    console.print(table)

    defaults = AgentSettings()
    lineages = [t.lineage for t in ended.values() if t.lineage is not None]
    depth = max((x.depth for x in lineages), default=0)
    # The agents that held a root's work down to this task: its ancestors' and its own.
    chains = [[*t.lineage.agents, t.agent or "?"] for t in ended.values() if t.lineage]
    holds = max((c.count(a) for c in chains for a in set(c)), default=1)
    dropped = sum(mix.values())
    console.print(f"per task dropped by a person ({dropped}): "
                  f"{total_calls / dropped:.2f} calls, {tokens / dropped:,.0f} tokens")
    console.print(f"tokens per task: {tokens / max(1, len(ended)):,.0f} "
                  f"({tokens:,} in all, estimated from request and reply sizes)")
    console.print(f"delegation: deepest level {depth} (limit {defaults.max_delegation_depth}), "
                  f"most holds of one root by one agent {holds} "
                  f"(limit {defaults.max_passes_per_agent}), {refusals} create_task refused")
    checks = {
        "every task done": not failed and not left,
        f"calls per task ≤ {TARGET_CALLS}": per_task <= TARGET_CALLS,
        "loops cut within their limits": depth <= defaults.max_delegation_depth
        and holds <= defaults.max_passes_per_agent,
    }
    if left:
        console.print(f"not ended: {', '.join(sorted(left))}")
    for what, ok in checks.items():
        console.print(f"{'[green]met[/]' if ok else '[red]MISSED[/]'}: {what}")
    return 0 if all(checks.values()) else 1


def _refusals(hive: Hive) -> int:
    """Calls refused by a loop limit, from the agents' audit logs."""
    count = 0
    for name in AGENTS:
        for line in hive.audit_path(name).read_text().splitlines():
            record = json.loads(line)
            if record.get("event") == "cycle":
                count += len((record.get("effects") or {}).get("refusals") or [])
    return count


if __name__ == "__main__":
    raise SystemExit(main())
