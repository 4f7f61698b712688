"""`hivemind memory ...`: the long-term store of a hive (`.hivemind/memory.db`) by hand."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from hivemind.cli.common import HiveOption, JsonOption, console, err_console, fail
from hivemind.cli.memory_import_cmd import import_cmd
from hivemind.cli.memory_list import list_cmd, results_table, stored_importance
from hivemind.cli.memory_store import EmbeddingsOption, agent_weights
from hivemind.cli.memory_store import checked_project as _project
from hivemind.cli.memory_store import open_store as _store
from hivemind.errors import UserError
from hivemind.hive.layout import HUMAN
from hivemind.ltm.jsonl import parse_time
from hivemind.ltm.records import MAX_CONTENT_CHARS, MemoryRecord, ScoredMemory
from hivemind.ltm.store import LongTermMemory

memory_app = typer.Typer(
    name="memory",
    help=(
        "The hive's long-term memory (.hivemind/memory.db): import conversations or notes, "
        "search them as an agent would, list the newest, add, export, count (stats), "
        "approve what agents proposed, or forget."
    ),
    no_args_is_help=True,
)

ProjectOption = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="Project the memories belong to; a project sees only its own memories "
        "plus global ones.",
        show_default=False, metavar="NAME"
    ),
]

def _time(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        fail(f"{what}: {exc}")


def _result_json(m: ScoredMemory, with_content: bool = True) -> dict[str, Any]:
    out = {**m.terms(), **stored_importance(m.record)}
    if with_content:
        out["content"] = m.content
    return out


def _record_json(record: MemoryRecord) -> dict[str, Any]:
    """What `add` and `approve` tell a script about the memory they wrote."""
    return {
        "id": record.id, "status": record.status.value, "tier": record.tier.value,
        "project": record.project, "importance": record.importance,
        "preference": record.preference, "content": record.content,
    }  # fmt: skip


memory_app.command("import")(import_cmd)


@memory_app.command("search", short_help="Search memories as an agent would; shows the scores.")
def search_cmd(
    query: Annotated[
        str | None, typer.Argument(help="What to look for, in plain words.", show_default=False)
    ] = None,
    *,
    project: ProjectOption = None,
    task: Annotated[
        str | None,
        typer.Option("--task", metavar="ID",
                     help="Also search this task's memories (a task of --project)."),
    ] = None,
    k: Annotated[
        int, typer.Option("--k", min=1, max=1000, help="How many results.", metavar="N")
    ] = 10,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="'Now' for recency, ISO 8601 (default: the current time).",
            show_default=False, metavar="TIME"
        ),
    ] = None,
    queries: Annotated[
        Path | None,
        typer.Option(
            "--queries",
            help="JSONL file of searches, one per line: query, and optionally id, project, "
            "at, k, domain, task_type. Prints one JSON line per search: "
            "{id, results: [{id, score, ...}]}.",
            show_default=False, metavar="FILE"
        ),
    ] = None,
    domain: Annotated[
        str | None,
        typer.Option("--domain", help="Only memories of this domain (as a task's domain: "
                     "says it, e.g. billing).", show_default=False, metavar="DOMAIN"),
    ] = None,
    task_type: Annotated[
        str | None,
        typer.Option("--task-type", help="Only memories of this kind of task (e.g. fix).",
                     show_default=False, metavar="TYPE"),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Rank with this agent's weights (its ROM's retrieval: "
                     "over hive.toml's; default: hive.toml's).", show_default=False,
                     metavar="AGENT"),
    ] = None,
    embeddings: EmbeddingsOption = False,
    as_json: JsonOption = False,
    hive: HiveOption = None,
) -> None:
    """Search long-term memory as an agent would (relevance, recency, importance).

    rel and rec are the score's terms; importance is the stored one and how it was set (given, heuristic or model). Searching is read-only: it does not count as an access. With --json: one JSON array of results, best first ([] if none).
    """  # noqa: E501
    if (query is None) == (queries is None):
        fail("give either a QUERY or --queries FILE")
    project = _project(project)
    now = _time(at, "--at")
    with _store(hive, embeddings, write=False) as (where, ltm):
        if agent is not None:
            ltm.retriever.weights = agent_weights(where, agent)
        if queries is not None:
            _batch_search(ltm, queries, project=project, task=task, k=k, now=now,
                          labels={"domain": domain, "task_type": task_type})
            return
        assert query is not None
        found = ltm.recall(
            query, agent=HUMAN, project=project, task_id=task, k=k, at=now, record_access=False,
            domain=domain, task_type=task_type,
        )
        if as_json:
            print(json.dumps([_result_json(m) for m in found], ensure_ascii=False))
            return
        if not found:
            hint = "" if project else " (project memories need --project)"
            console.print(f"no memories match{hint}", highlight=False, soft_wrap=True)
            return
        console.print(results_table(found))


def _batch_search(
    ltm: LongTermMemory,
    path: Path,
    *,
    project: str | None,
    task: str | None,
    k: int,
    now: datetime | None,
    labels: dict[str, str | None],
) -> None:
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        fail(f"{path}: cannot read: {exc.strerror or exc}")
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        qid: Any = None
        try:
            spec = json.loads(raw)
            if not isinstance(spec, dict):
                raise ValueError("expected a JSON object")
            qid = spec.get("id")
            q = spec.get("query")
            if not isinstance(q, str):
                raise ValueError("query is missing")
            when = parse_time(spec["at"]) if spec.get("at") is not None else now
            found = ltm.recall(
                q, agent=HUMAN, project=spec.get("project", project), task_id=task,
                k=int(spec.get("k", k)), at=when, record_access=False,
                domain=spec.get("domain", labels["domain"]),
                task_type=spec.get("task_type", labels["task_type"]),
            )  # fmt: skip
        except (ValueError, TypeError, UserError) as exc:
            message = f"line {number}: {exc}"
            err_console.print(
                f"[yellow]skipped[/] {escape(message)}", highlight=False, soft_wrap=True
            )
            print(json.dumps({"id": qid, "results": [], "error": message}, ensure_ascii=False))
            continue
        results = [_result_json(m, with_content=False) for m in found]
        print(json.dumps({"id": qid, "results": results}, ensure_ascii=False))


memory_app.command("list", short_help="List memories, newest first.")(list_cmd)


@memory_app.command("add")
def add_cmd(
    text: Annotated[
        str,
        typer.Argument(
            help=f"The memory, in plain words (at most {MAX_CONTENT_CHARS:,} characters)."
        ),
    ],
    *,
    importance: Annotated[
        float | None,
        typer.Option(
            "--importance",
            min=0.0,
            max=1.0,
            help="0-1 (default: estimated from the text).",
            show_default=False, metavar="0-1"
        ),
    ] = None,
    project: ProjectOption = None,
    scope: Annotated[
        str | None,
        typer.Option(
            "--scope",
            help="project or global (default: project if --project is given, else global); "
            "global with --project is refused.",
            show_default=False, metavar="TIER"
        ),
    ] = None,
    preference: Annotated[
        bool,
        typer.Option(
            "--preference",
            help="A lasting preference. You typing it approves it: agents see it at once "
            "(one an agent proposes waits for `hivemind memory approve ID`).",
        ),
    ] = False,
    agent: Annotated[
        str, typer.Option("--agent", help="Who remembers it.", metavar="AGENT")
    ] = HUMAN,
    domain: Annotated[
        str | None,
        typer.Option("--domain", help="Its domain (e.g. billing): tasks of that domain learn "
                     "its value, and search --domain finds it.", show_default=False,
                     metavar="DOMAIN"),
    ] = None,
    task_type: Annotated[
        str | None,
        typer.Option("--task-type", help="The kind of task it is about (e.g. fix).",
                     show_default=False, metavar="TYPE"),
    ] = None,
    embeddings: EmbeddingsOption = False,
    as_json: JsonOption = False,
    hive: HiveOption = None,
) -> None:
    """Add one memory."""
    project = _project(project)
    chosen = scope or ("project" if project else "global")
    if chosen not in ("project", "global"):
        fail(f"--scope must be project or global (got {chosen!r}); task memories belong to tasks")
    if chosen == "global" and project is not None:
        fail(f"--scope global contradicts --project {project}: a global memory belongs to "
             "no project; leave one of them out")  # fmt: skip
    if len(text.strip()) > MAX_CONTENT_CHARS:
        fail(f"the memory is too long ({len(text.strip()):,} characters; at most "
             f"{MAX_CONTENT_CHARS:,}): an agent could never fit it in its context")  # fmt: skip
    with _store(hive, embeddings) as (_, ltm):
        try:
            record = ltm.remember(
                text, agent=agent, scope="project" if chosen == "project" else "global",
                project=project, importance=importance, preference=preference,
                domain=domain, task_type=task_type,
                needs_approval=False,  # typed by the person: approved by that act
            )  # fmt: skip
        except UserError as exc:
            fail(str(exc))
    if as_json:
        print(json.dumps(_record_json(record), ensure_ascii=False))
        return
    where = f"project {record.project}" if record.project else "global"
    console.print(
        f"remembered {record.id} ({where}, importance {record.importance:.2f})",
        highlight=False,
        soft_wrap=True,
    )


@memory_app.command("export", short_help="Print every memory as JSONL (re-importable).")
def export_cmd(
    as_json: Annotated[
        bool, typer.Option("--json", help="JSONL (the only format; accepted for scripts).")
    ] = False,
    hive: HiveOption = None,
) -> None:
    """Print every memory as JSONL on standard output (re-importable with `memory import`)."""
    with _store(hive, write=False) as (_, ltm):
        for line in ltm.export():
            print(json.dumps(line, ensure_ascii=False))


@memory_app.command("stats")
def stats_cmd(as_json: JsonOption = False, hive: HiveOption = None) -> None:
    """How many memories there are, by tier, kind, status and project."""
    with _store(hive, write=False) as (_, ltm):
        stats = ltm.stats()
    if as_json:
        print(json.dumps(stats, ensure_ascii=False))
        return
    table = Table("what", "count", show_header=False)
    table.add_row("memories", str(stats["total"]))
    for group in ("by_tier", "by_kind", "by_status", "by_project"):
        for name, count in sorted(stats[group].items()):
            table.add_row(f"{group.removeprefix('by_')} {name}", str(count))
    table.add_row("with embeddings", str(stats["embedded"]))
    table.add_row("oldest", stats["oldest"] or "-")
    table.add_row("newest", stats["newest"] or "-")
    console.print(table)


@memory_app.command("approve", short_help="Approve proposed global memories for every agent.")
def approve_cmd(
    memory_ids: Annotated[
        list[str], typer.Argument(metavar="ID...", help="The proposed memories' ids.")
    ],
    as_json: JsonOption = False,
    hive: HiveOption = None,
) -> None:
    """Approve proposed global memories: from now on every agent can recall them.

    Agents propose a global preference, and everything global from work of no project (a task without project:, an agent holding no task); the message in mailboxes/human names the ids. To decline a proposal instead, delete it: `hivemind memory forget ID...`. With --json: one JSON object per approved memory, one per line.
    """  # noqa: E501
    problems: list[str] = []
    with _store(hive) as (_, ltm):
        for memory_id in dict.fromkeys(memory_ids):
            try:
                record = ltm.approve(memory_id)
            except UserError as exc:
                problems.append(str(exc))
                continue
            if as_json:
                print(json.dumps(_record_json(record), ensure_ascii=False))
            else:
                console.print(f"approved {escape(record.id)}: {escape(record.content)}",
                              highlight=False, soft_wrap=True)
    if problems:
        for problem in problems[:-1]:
            err_console.print(f"[bold red]error:[/] {escape(problem)}", highlight=False,
                              soft_wrap=True)
        fail(problems[-1])


@memory_app.command("forget", short_help="Delete memories by id (also declines a proposal).")
def forget_cmd(
    memory_ids: Annotated[
        list[str], typer.Argument(metavar="ID...", help="The ids of the memories to delete.")
    ],
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="Only this project's memories (needed when several projects use an id).",
            show_default=False, metavar="NAME"
        ),
    ] = None,
    as_json: JsonOption = False,
    hive: HiveOption = None,
) -> None:
    """Delete memories by id, for good; forgetting a proposed preference declines it.

    An unknown id is an error (one line each); the known ids are deleted all the same. An id several scopes use (two projects importing the same chat ids) needs --project: without it nothing is deleted. With --json: {"forgotten": [ids], "unknown": [ids]}.
    """  # noqa: E501
    with _store(hive) as (_, ltm):
        forgotten, unknown = ltm.forget(memory_ids, project=_project(project))
    if as_json:
        print(json.dumps({"forgotten": forgotten, "unknown": unknown}, ensure_ascii=False))
    else:
        for memory_id in forgotten:
            console.print(f"forgot {escape(memory_id)}", highlight=False, soft_wrap=True)
    for memory_id in unknown:
        err_console.print(
            f"[bold red]error:[/] no memory with id {escape(repr(memory_id))}",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
    if unknown:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the `memory` command group to the `hivemind` app."""
    app.add_typer(memory_app, short_help="Long-term memory: import, search, add, export, forget.")
