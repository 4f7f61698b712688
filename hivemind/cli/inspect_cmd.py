"""`hivemind inspect AGENT`: the context an agent would get now, and why blocks are left out."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.box import SIMPLE_HEAD
from rich.table import Table

from hivemind.cli.common import HiveOption, JsonOption, console, fail, resolve_hive
from hivemind.errors import CriticalOverBudgetError, UnknownAgentError
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.memory.blocks import AnyBlock, KnowledgeBlock, RomBlock, TaskBlock
from hivemind.memory.builder import BuiltContext, ContextBuilder
from hivemind.memory.compressor import MemoryCompressor
from hivemind.memory.loader import ContentLoader
from hivemind.memory.relevance import RelevanceScorer
from hivemind.memory.selector import MemorySelector, Selection
from hivemind.memory.tokens import TokenCounter

DEFAULT_BUDGET = 100_000
_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)
_HEAD_BYTES = 64 * 1024


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(YAML front matter, body); a missing or broken front matter gives ({}, text)."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    for i in range(1, len(lines)):
        if lines[i].rstrip() == "---":
            try:
                data = yaml.safe_load("".join(lines[1:i]))
            except yaml.YAMLError:
                return {}, text
            return (data if isinstance(data, dict) else {}), "".join(lines[i + 1 :])
    return {}, text


def _head(path: Path) -> str:
    with path.open("rb") as f:
        return f.read(_HEAD_BYTES).decode("utf-8", errors="replace")


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def gather_blocks(hive: Hive, agent: str) -> tuple[list[AnyBlock], int]:
    """The blocks `agent`'s context holds now (ROM, knowledge, pending tasks) and its budget.

    Stand-in for the runtime's perception; the budget is `max_context_tokens` from the ROM.
    """
    names = hive.agent_names()
    if agent not in names:
        known = ", ".join(names) if names else "none (add agents/<name>/ROM.md)"
        raise UnknownAgentError(f"no agent named {agent!r} in {hive.root}; agents: {known}")
    rom = hive.rom_path(agent)
    meta, _ = _front_matter(_head(rom))
    budget = meta.get("max_context_tokens", DEFAULT_BUDGET)
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        budget = DEFAULT_BUDGET
    blocks: list[AnyBlock] = [
        RomBlock(agent=agent, location=hive.relative(rom), timestamp=_mtime(rom))
    ]
    if hive.knowledge_dir.is_dir():
        for note in sorted(hive.knowledge_dir.rglob("*.md")):
            if is_temp_name(note.name) or not note.is_file():
                continue
            found = _HEADING.search(_front_matter(_head(note))[1])
            blocks.append(
                KnowledgeBlock(
                    topic=found.group(1) if found else note.stem,
                    location=hive.relative(note),
                    timestamp=_mtime(note),
                )
            )
    if hive.tasks_dir.is_dir():
        for task in sorted(hive.tasks_dir.glob("*.md")):
            if is_temp_name(task.name) or not task.is_file():
                continue
            fm, body = _front_matter(_head(task))
            found = _HEADING.search(body)
            title = fm.get("title") or (found.group(1) if found else task.stem)
            blocks.append(
                TaskBlock(
                    task_id=str(fm.get("id") or task.stem),
                    title=str(title),
                    location=hive.relative(task),
                    project=str(fm["project"]) if fm.get("project") else None,
                    timestamp=_mtime(task),
                )
            )
    return blocks, budget


def _rows(selection: Selection, built: BuiltContext) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for block in selection.kept:
        if block.id in built.token_counts:
            rows.append(_row(block, built.token_counts[block.id], True,
                             built.notes.get(block.id, "")))
    for d in [*selection.dropped, *built.dropped]:
        rows.append(_row(d.block, d.tokens, False, d.reason))
    return rows


def _row(block: AnyBlock, tokens: int, kept: bool, reason: str) -> dict[str, Any]:
    return {
        "id": block.id,
        "type": block.type.value,
        "priority": block.priority.name.lower(),
        "tokens": tokens,
        "kept": kept,
        "reason": reason,
    }


def inspect_agent(hive: Hive, agent: str, budget: int | None = None) -> dict[str, Any]:
    """Gather, select and build as a cycle would; a report of every block."""
    blocks, rom_budget = gather_blocks(hive, agent)
    budget = budget or rom_budget
    counter = TokenCounter()
    loader = ContentLoader(hive.root, counter)
    compressor = MemoryCompressor(counter=counter)
    scorer = RelevanceScorer()
    scorer.set_task(" ".join(b.keywords_text() for b in blocks if isinstance(b, TaskBlock)))
    selector = MemorySelector(loader, counter, scorer, compressor.max_block_tokens)
    selection = selector.select(blocks, budget)
    built = asyncio.run(ContextBuilder(loader, counter, compressor).build(selection))
    by_type: dict[str, int] = {}
    for e in built.entries:
        kind = e["metadata"]["type"]
        by_type[kind] = by_type.get(kind, 0) + built.token_counts[e["id"]]
    return {
        "agent": agent,
        "budget": budget,
        "used": built.tokens,
        "blocks": _rows(selection, built),
        "tokens_by_type": by_type,
    }


def _print_report(report: dict[str, Any]) -> None:
    table = Table(title=f"context of {report['agent']}", title_justify="left", box=SIMPLE_HEAD)
    table.add_column("id", overflow="fold", ratio=3)
    table.add_column("type", no_wrap=True)
    table.add_column("priority", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("kept", no_wrap=True)
    table.add_column("reason", overflow="fold", ratio=4)
    for row in report["blocks"]:
        kept = "[green]kept[/]" if row["kept"] else "[red]dropped[/]"
        table.add_row(row["id"], row["type"], row["priority"], f"{row['tokens']:,}", kept,
                      row["reason"])
    console.print(table)
    per_type = ", ".join(f"{k} {v:,}" for k, v in report["tokens_by_type"].items()) or "nothing"
    console.print(f"tokens per type: {per_type}", highlight=False)
    share = 100 * report["used"] / report["budget"]
    console.print(f"used {report['used']:,} of a budget of {report['budget']:,} tokens"
                  f" ({share:.1f} %)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `inspect` to the `hivemind` app."""

    @app.command("inspect")
    def inspect(
        agent: Annotated[str, typer.Argument(help="The agent: a folder of agents/ with a ROM.md.")],
        hive: HiveOption = None,
        budget: Annotated[
            int | None,
            typer.Option("--budget", min=1, help="Token budget (default: the ROM's "
                         "max_context_tokens, else 100000).", show_default=False),
        ] = None,
        as_json: JsonOption = False,
    ) -> None:
        """Show the context AGENT would get now: its ROM, knowledge notes and pending
        tasks, which blocks are kept or dropped and why, and the tokens per type."""
        where = resolve_hive(hive)
        try:
            report = inspect_agent(where, agent, budget)
        except UnknownAgentError as exc:
            fail(str(exc))
        except CriticalOverBudgetError as exc:  # a runtime failure, as `hivemind run` exits
            fail(str(exc), code=2)
        if as_json:
            typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        else:
            _print_report(report)
