"""Prompt size: the tokens of the request each agent sends, by part, against the targets.

Two hives: the repository's example hive (the one README's first command runs:
agents lead, researcher and writer, its knowledge/ and tasks/) and a fresh
`hivemind init` hive (one agent, `assistant`). For every agent, two requests built
by the cycle's own code (`agent/inspect.py`'s `request_of`, what `hivemind inspect
AGENT --request --json` shows): idle with one mail ("Hello", as `hivemind send`
delivers it), and its first task (the example hive's tasks/, routed as the daemon
would; the init hive: one task). Then a task under way: the request of the third
cycle on a task (two cycles of steps in view), from a run with a scripted model.
Tokens are counted with the runtime's own counter (tiktoken cl100k, what the context
budget is counted in): the tool specs as compact JSON, the system prompt, the context
by entry type. Then a run of each hive with the offline provider: the share of each
cycle's request a prompt cache could serve (the prefix it has in common with the same
agent's request before it).

    python bench/bench_prompt.py            # the runs: 12 tasks, 6 mails
    python bench/bench_prompt.py --quick    # 4 tasks, 2 mails
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
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
from hivemind.llm.base import ModelRequest, ModelResponse, ToolCall, Usage
from hivemind.llm.offline import OfflineProvider
from hivemind.memory.tokens import TokenCounter

REPO = Path(__file__).resolve().parents[1]
INIT_TASK = """\
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

PARTS = ("system", "tools", "knowledge", "file", "message", "task", "history", "context",
         "status", "other")

# Measured with this script at 73fd9fa, before the last pass on the prompt (cl100k).
BEFORE: dict[tuple[str, str, str], dict[str, int]] = {
    ("example", "lead", "idle"): {"system": 648, "tools": 951, "knowledge": 548,
                                  "message": 90, "status": 40, "total": 2279},
    ("example", "lead", "task"): {"system": 648, "tools": 951, "knowledge": 548,
                                  "task": 240, "status": 45, "total": 2434},
    ("example", "researcher", "idle"): {"system": 538, "tools": 951, "knowledge": 548,
                                        "message": 91, "status": 40, "total": 2170},
    ("example", "researcher", "task"): {"system": 538, "tools": 951, "knowledge": 548,
                                        "task": 206, "status": 45, "total": 2290},
    ("example", "writer", "idle"): {"system": 543, "tools": 951, "knowledge": 294,
                                    "message": 90, "status": 40, "total": 1920},
    ("example", "writer", "task"): {"system": 543, "tools": 951, "knowledge": 294,
                                    "task": 166, "status": 45, "total": 2001},
    ("init", "assistant", "idle"): {"system": 542, "tools": 951, "knowledge": 153,
                                    "message": 90, "status": 40, "total": 1778},
    ("init", "assistant", "task"): {"system": 542, "tools": 951, "knowledge": 153,
                                    "task": 173, "status": 45, "total": 1866},
    ("example", "lead", "task, 3rd cycle"): {
        "system": 648, "tools": 951, "knowledge": 548, "history": 554, "context": 122,
        "task": 101, "status": 45, "total": 2970},
    ("example", "researcher", "task, 3rd cycle"): {
        "system": 538, "tools": 951, "knowledge": 548, "history": 554, "context": 122,
        "task": 102, "status": 45, "total": 2861},
    ("example", "writer", "task, 3rd cycle"): {
        "system": 543, "tools": 951, "knowledge": 294, "history": 554, "context": 122,
        "task": 101, "status": 45, "total": 2611},
    ("init", "assistant", "task, 3rd cycle"): {
        "system": 542, "tools": 951, "knowledge": 153, "history": 553, "context": 122,
        "task": 101, "status": 45, "total": 2468},
}
BEFORE_PREFIX = {"example": "82% (min 70%)", "init": "82% (min 73%)"}
TARGETS = {"idle": 1800, "task": 2400, "task, 3rd cycle": 2400}
PREFIX_TARGET = 0.80


def example_hive(root: Path) -> Hive:
    """A copy of the repository's example hive: agents, knowledge, mailboxes (and its
    hive.toml, if it has one); no tasks."""
    root.mkdir(parents=True)
    for name in ("agents", "knowledge", "mailboxes"):
        shutil.copytree(REPO / name, root / name)
    if (REPO / "hive.toml").is_file():
        shutil.copy2(REPO / "hive.toml", root / "hive.toml")
    (root / "tasks").mkdir()
    return Hive(root)


def example_tasks(hive: Hive) -> None:
    for path in sorted((REPO / "tasks").glob("*.md")):
        shutil.copy2(path, hive.tasks_dir / path.name)


def init_tasks(hive: Hive) -> None:
    (hive.tasks_dir / "summarise-conventions.md").write_text(INIT_TASK)


HIVES: dict[str, tuple[Callable[[Path], Hive], Callable[[Hive], None]]] = {
    "example": (example_hive, example_tasks),
    "init": (init_hive, init_tasks),
}


def parts(request: dict[str, Any], counter: TokenCounter) -> dict[str, int]:
    """Tokens per part of a request: system, tools, each context entry type, total."""
    tools = json.dumps(request["tool_specs"], separators=(",", ":"), ensure_ascii=False)
    out = {"system": counter.count(request["system"]), "tools": counter.count(tools)}
    for entry in json.loads(request["context"]):
        kind = entry["metadata"]["type"]
        kind = kind if kind in PARTS else "other"
        text = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
        out[kind] = out.get(kind, 0) + counter.count(text)
    out["total"] = out["system"] + out["tools"] + counter.count(request["context"])
    return out


def measure_requests(base: Path, counter: TokenCounter) -> dict[tuple[str, str, str],
                                                                  dict[str, int]]:
    """(hive, agent, idle|task) → tokens by part."""
    out: dict[tuple[str, str, str], dict[str, int]] = {}
    for hive_name, (make, add_tasks) in HIVES.items():
        for agent in make(base / f"{hive_name}-names").agent_names():
            idle = make(base / f"{hive_name}-{agent}-idle")
            PostOffice(idle).send(HUMAN, agent, "", "Hello")
            working = make(base / f"{hive_name}-{agent}-task")
            add_tasks(working)
            for case, hive in (("idle", idle), ("task", working)):
                out[hive_name, agent, case] = parts(asyncio.run(request_of(hive, agent)),
                                                    counter)
    return out


class Worker:
    """A model that works its task over three cycles, as a careful one does: it reads a
    note and writes a draft, then edits it and looks at what is in workspace/, then
    finishes (mail to `human` would make the task wait for an answer). The first
    request of its third cycle (two cycles of steps in its history, the note pinned)
    is kept: a typical request of a task under way."""

    name = "bench-worker"
    offline = False

    def __init__(self) -> None:
        self.cycles: dict[str, int] = {}
        self.kept: dict[str, ModelRequest] = {}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        entries = json.loads(request.context_stable + request.context_volatile)
        tasks = [e["metadata"]["task_id"] for e in entries
                 if e["metadata"].get("type") == "task"]
        calls: list[ToolCall] = []
        text = ""
        if request.turns or not tasks:
            text = "Done for this turn."
        else:
            n = self.cycles[request.agent] = self.cycles.get(request.agent, 0) + 1
            task = tasks[0]
            if n == 1:
                calls = [self._call("read_file", path="knowledge/hive-conventions.md"),
                         self._call("write_file", path=f"workspace/{task}.md",
                                    content="# Draft\n\n" + "A first paragraph. " * 20)]
            elif n == 2:
                calls = [self._call("edit_file", path=f"workspace/{task}.md",
                                    old="# Draft", new="# Summary"),
                         self._call("list_files", path="workspace")]
            else:
                self.kept.setdefault(request.agent, request)
                calls = [self._call("complete_task", task_id=task,
                                    result=f"workspace/{task}.md: the checked draft.")]
        return ModelResponse(text=text, tool_calls=calls,
                             stop_reason="tool_use" if calls else "end_turn",
                             usage=Usage(input_tokens=1, output_tokens=1),
                             model=request.model, provider=self.name)

    def _call(self, name: str, **args: Any) -> ToolCall:
        return ToolCall(id=f"call-{name}-{len(self.kept)}-{sum(self.cycles.values())}",
                        name=name, input=args)

    async def aclose(self) -> None:
        return None


def measure_under_way(base: Path, counter: TokenCounter) -> dict[tuple[str, str, str],
                                                                  dict[str, int]]:
    """(hive, agent, "task, 3rd cycle") → tokens by part, each agent given one task."""
    out: dict[tuple[str, str, str], dict[str, int]] = {}
    for hive_name, (make, _) in HIVES.items():
        for agent in make(base / f"{hive_name}-names-3").agent_names():
            hive = make(base / f"{hive_name}-{agent}-under-way")
            (hive.tasks_dir / "draft-the-summary.md").write_text(
                f"---\nassignee: {agent}\n---\n# Draft the summary\n\nSummarise the "
                "notes of knowledge/ for a newcomer, in workspace/.\n")
            config = load_hive_config(hive)
            config.daemon.settle_time = 0.0
            worker = Worker()
            daemon = Daemon(hive, config, worker, RunOptions(until_idle=True, workers=1))
            asyncio.run(asyncio.wait_for(daemon.run(), 120))
            request = worker.kept.get(agent)
            if request is not None:
                out[hive_name, agent, "task, 3rd cycle"] = parts({
                    "system": request.system,
                    "tool_specs": [t.model_dump() for t in request.tools],
                    "context": request.context_stable + request.context_volatile,
                }, counter)
    return out


def prefix_reuse(base: Path, hive_name: str, tasks: int, mails: int) -> list[float]:
    """The cacheable share of each cycle's request (after an agent's first), over a run
    of the hive given its own first task(s), then `tasks` tasks one after another, each
    assigned to the next agent in turn (the first `mails` with a mail to that agent)."""
    make, add_tasks = HIVES[hive_name]
    hive = make(base / f"run-{hive_name}")
    config = load_hive_config(hive)
    config.daemon.settle_time = 0.0
    reports: list[CycleReport] = []
    daemon = Daemon(hive, config, OfflineProvider(), RunOptions(workers=1),
                    on_cycle=reports.append)
    names = hive.agent_names()

    async def settle(done: Callable[[], bool], running: asyncio.Task[None]) -> None:
        for _ in range(3000):
            if done() or running.done():
                return
            await asyncio.sleep(0.01)

    async def run() -> None:
        running = asyncio.create_task(daemon.run())
        add_tasks(hive)  # the hive's own first
        for i in range(tasks):
            agent = names[i % len(names)]
            if i < mails:
                PostOffice(hive).send(HUMAN, agent, f"question {i}", "Where do outputs go?")
            (hive.tasks_dir / f"t{i}.md").write_text(
                f"---\nassignee: {agent}\n---\n# Summarise note {i}\n\n"
                f"Write workspace/t{i}.md: what knowledge/ says.\n")
            await settle((hive.done_dir / f"t{i}.md").is_file, running)
        daemon.stop("bench done")
        await running

    asyncio.run(run())
    return [r.prefix_reuse for r in reports if r.prefix_reuse is not None]


def _n(value: int | None) -> str:
    return f"{value:,}" if value else "–"


def request_table(now: dict[tuple[str, str, str], dict[str, int]]) -> Table:
    table = Table(title="request tokens by part (cl100k): before → now")
    shown = [p for p in PARTS if any(p in r for r in (*now.values(), *BEFORE.values()))]
    for col in ("hive", "agent", "request", *shown, "total", "target"):
        table.add_column(col, justify="left" if col in ("hive", "agent", "request") else "right",
                         no_wrap=True)
    for key, got in now.items():
        before = BEFORE.get(key, {})
        cells = []
        for part in (*shown, "total"):
            b, g = before.get(part), got.get(part)
            cells.append(_n(g) if b is None or b == g else f"{_n(b)} → {_n(g)}")
        target = TARGETS[key[2]]
        verdict = "ok" if got["total"] <= target else "OVER"
        table.add_row(*key, *cells, f"≤ {target:,} {verdict}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 tasks and 2 mails for the run")
    args = parser.parse_args()
    # A copied hive is not trusted: its MCP servers do not start (and would say so for
    # every request built); the requests are measured as they are sent, without them.
    logging.getLogger("hivemind").setLevel(logging.ERROR)
    counter = TokenCounter()
    with tempfile.TemporaryDirectory(prefix="bench-prompt-") as tmp:
        now = measure_requests(Path(tmp), counter)
        now.update(measure_under_way(Path(tmp), counter))
        reuse = {name: prefix_reuse(Path(tmp), name, 4 if args.quick else 12,
                                    2 if args.quick else 6)
                 for name in HIVES}
    console = Console(width=200)
    console.print(request_table(now))
    prefix = Table(title="cacheable prefix over consecutive cycles of an agent (offline run)")
    for col in ("hive", "before", "now: median (min)", "cycles", "target"):
        prefix.add_column(col)
    for name, shares in reuse.items():
        shown = (f"{statistics.median(shares):.0%} (min {min(shares):.0%})"
                 if shares else "n/a")
        ok = "ok" if shares and statistics.median(shares) >= PREFIX_TARGET else "UNDER"
        prefix.add_row(name, BEFORE_PREFIX.get(name, "–"), shown, str(len(shares)),
                       f"≥ {PREFIX_TARGET:.0%} {ok}")
    console.print(prefix)


if __name__ == "__main__":
    main()
