"""`hivemind memory import`: memories from a JSONL file, bad lines reported by number."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from hivemind.cli.common import HiveOption, JsonOption, console, err_console, fail
from hivemind.cli.memory_store import EmbeddingsOption
from hivemind.cli.memory_store import checked_project as _project
from hivemind.cli.memory_store import open_store as _store
from hivemind.ltm.jsonl import ImportSummary
from hivemind.ltm.store import LongTermMemory

ImportProjectOption = Annotated[
    str | None,
    typer.Option(
        "--project",
        help="Put every imported memory in this project, overriding the project a line "
        "gives (an exported line's too); a global line becomes a project memory. "
        "Without it a line keeps its own project, and an update keeps the stored one.",
        show_default=False, metavar="NAME"
    ),
]
_SHOWN_ERRORS = 20
_LINE_PROBLEM = re.compile(r"line (\d+): (.*)", re.DOTALL)


def import_cmd(
    file: Annotated[
        Path, typer.Argument(help="JSONL file, one memory per line ('-' reads standard input).")
    ],
    project: ImportProjectOption = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", metavar="AGENT",
                     help="Record this agent as the author of lines that name none."),
    ] = None,
    embeddings: EmbeddingsOption = False,
    as_json: JsonOption = False,
    hive: HiveOption = None,
) -> None:
    """Import memories from a JSONL file, one JSON object per line.

    Fields: "content" (required, at most 4,000 characters); optional "id" (kept, so searches return it), "timestamp" (ISO 8601), "importance" (0-1), "domain", "task_type", "tags". UTF-8; a leading BOM and CRLF line ends are fine.

    Bad lines are reported by line number and skipped; the rest is imported. A memory is its project (or task, or the global tier) plus its id: two projects may both hold D1:1. A line lands in --project (else the project or tier it names) and updates only the memory with its id there, keeping what the line does not give: access count, last access, learned goal values. A line naming no project updates the one memory with its id (refused if several projects hold it). An id may appear once per project in a file (a repeat is a bad line).
    """  # noqa: E501
    project = _project(project)
    with _store(hive, embeddings) as (_, ltm), _lines(file) as (lines, total):
        report = _import_with_progress(ltm, lines, total, project=project, agent=agent)
    if as_json:
        print(json.dumps(_import_json(file, report), ensure_ascii=False))
    else:
        _print_problems(report, file)
    if report.imported == 0 and report.errors:
        fail(f"{file}: no line could be imported ({len(report.errors)} bad lines)")
    if as_json:
        return
    rate = f"{report.lines_per_second:,.0f} lines/s" if report.seconds > 0 else "instant"
    split = _split(report)
    skipped = f", {len(report.errors)} bad lines skipped" if report.errors else ""
    evicted = f", {report.evicted} low-importance memories evicted" if report.evicted else ""
    console.print(
        f"imported {report.imported} memories{split} from {escape(str(file))}{skipped}{evicted} "
        f"in {report.seconds:.2f} s ({rate})",
        highlight=False,
        soft_wrap=True,
    )


def _split(report: ImportSummary) -> str:
    """The split of the imported count, e.g. `(2 new, 1 updated)`; empty if all are new."""
    if not report.updated and not report.unchanged:
        return ""
    parts = [f"{report.new} new", f"{report.updated} updated"]
    if report.unchanged:
        parts.append(f"{report.unchanged} unchanged")
    return f" ({', '.join(parts)})"


def _print_problems(report: ImportSummary, file: Path) -> None:
    where = "standard input" if str(file) == "-" else str(file)
    for problem in report.errors[:_SHOWN_ERRORS]:
        err_console.print(
            f"[yellow]skipped[/] {escape(where)} {escape(problem)}", highlight=False, soft_wrap=True
        )
    if len(report.errors) > _SHOWN_ERRORS:
        err_console.print(f"[yellow]… and {len(report.errors) - _SHOWN_ERRORS} more bad lines[/]")
    for warning in report.warnings:
        err_console.print(f"[yellow]note:[/] {escape(warning)}", highlight=False)


def _import_json(file: Path, report: ImportSummary) -> dict[str, Any]:
    """The report for scripts: counts, and every skipped line with its reason."""
    skipped: list[dict[str, Any]] = []
    for problem in report.errors:  # each `line N: problem` (ImportReport.errors)
        match = _LINE_PROBLEM.fullmatch(problem)
        if match:
            skipped.append({"line": int(match[1]), "reason": match[2]})
        else:
            skipped.append({"line": None, "reason": problem})
    return {
        "file": str(file), "imported": report.imported, "new": report.new,
        "updated": report.updated, "unchanged": report.unchanged, "evicted": report.evicted,
        "skipped": skipped,
        "warnings": report.warnings, "seconds": round(report.seconds, 3),
    }  # fmt: skip


def _import_with_progress(
    ltm: LongTermMemory, lines: Iterator[str], total: int, *, project: str | None, agent: str | None
) -> ImportSummary:
    """Import with a progress bar on stderr for large files (10 000 lines and more)."""
    if total < 10_000:  # no bar at all: rich before 14.3 prints a blank line for a disabled one
        return ltm.import_jsonl(lines, project=project, agent=agent)
    with Progress(
        TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
        console=err_console, transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("import", total=total)
        return ltm.import_jsonl(
            lines, project=project, agent=agent, progress=lambda n: bar.advance(task, n)
        )


@contextmanager
def _lines(file: Path) -> Iterator[tuple[Iterator[str], int]]:
    if str(file) == "-":
        data = sys.stdin.read().splitlines()
        yield iter(data), len(data)
        return
    try:
        with file.open("rb") as f:
            total = sum(1 for _ in f)
        handle: TextIO = file.open(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        fail(f"{file}: cannot read: {exc.strerror or exc}")
    with handle:
        yield iter(handle), total
