"""`hivemind memory list` and `search`'s table: memories with their stored importance."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from hivemind.cli.common import HiveOption, JsonOption, console, fail
from hivemind.cli.memory_store import open_store
from hivemind.ltm.jsonl import export_line
from hivemind.ltm.records import MemoryRecord, MemoryStatus, ScoredMemory, Tier
from hivemind.ltm.scopes import describe_scope

_SHOWN_CHARS = 300


def shown_importance(record: MemoryRecord) -> str:
    """The stored importance and how it was set: `0.40 heuristic`, `0.89 model`."""
    source = f" {record.importance_by.value}" if record.importance_by is not None else ""
    return f"{record.importance:.2f}{source}"


def stored_importance(record: MemoryRecord) -> dict[str, Any]:
    """The same for scripts (`memory search --json` adds it to each result)."""
    by = record.importance_by.value if record.importance_by is not None else None
    return {"stored_importance": record.importance, "importance_by": by}


def results_table(found: list[ScoredMemory]) -> Table:
    """`memory search`'s table: rank, score and its terms, the stored importance."""
    table = Table("#", "id", "score", "rel", "rec", "importance", "memory")
    for rank, m in enumerate(found, start=1):
        text = m.content if len(m.content) <= 160 else m.content[:159] + "…"
        table.add_row(
            str(rank), escape(m.id), f"{m.score:.3f}", f"{m.relevance:.2f}", f"{m.recency:.2f}",
            shown_importance(m.record), escape(text),
        )  # fmt: skip
    return table


def list_cmd(
    *,
    project: Annotated[
        str | None,
        typer.Option("--project", help="Only this project's memories (its tasks' too).",
                     show_default=False, metavar="NAME"),
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option("--scope", help="Only memories of this tier: task, project or global.",
                     show_default=False, metavar="TIER"),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Only memories this agent wrote ('human' for yours).",
                     show_default=False, metavar="AGENT"),
    ] = None,
    limit: Annotated[
        int,
        typer.Option("-n", "--limit", min=1, help="How many to show, newest first.", metavar="N"),
    ] = 20,
    as_json: JsonOption = False,
    hive: HiveOption = None,
) -> None:
    """List memories, newest first, with their importance and how it was set.

    Importance (0-1) is `heuristic` (estimated from the text; the writing agent's model rates it later, within [memory] rating_share of its tokens), `model` (rated by that model) or `given` (stated by whoever wrote it). Unlike `search`, `list` shows every project unless --project narrows it. With --json: one JSON array of memories as `memory export` writes them.
    """  # noqa: E501
    filters: dict[str, Any] = {}
    if project is not None:
        if not project.strip():
            fail("--project is empty: give a project name, or leave --project out")
        filters["project"] = project
    if scope is not None:
        try:
            filters["tier"] = Tier(scope)
        except ValueError:
            fail(f"--scope must be task, project or global (got {scope!r})")
    if agent is not None:
        filters["agent"] = agent
    with open_store(hive, write=False) as (_, ltm):
        found = ltm.backend.query(filters, limit=limit, order_by=["-created_at", "-id"])
    if as_json:
        print(json.dumps([export_line(r) for r in found], ensure_ascii=False))
        return
    if not found:
        console.print("no memories" + (" match" if filters else " yet"), highlight=False)
        return
    # Two lines each, not a table: the text keeps the width a terminal has.
    for r in found:
        where = describe_scope(r.scope)
        if r.status is MemoryStatus.PROPOSED:
            where += " (proposed)"
        text = " ".join(r.content.split())
        if len(text) > _SHOWN_CHARS:
            text = text[: _SHOWN_CHARS - 1] + "…"
        console.print(
            f"[bold]{escape(r.id)}[/]  {r.created_at:%Y-%m-%d %H:%M}  {escape(where)}  "
            f"by {escape(r.agent or '-')}  importance {shown_importance(r)}",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
        console.print(f"    {escape(text)}", highlight=False)
