"""`hivemind task add`, `send`, `status` (and `init`, from `init_cmd`): the hive's files
from the command line."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.box import SIMPLE_HEAD
from rich.markup import escape
from rich.table import Table

from hivemind.cli.common import (
    HiveArgument,
    HiveOption,
    JsonOption,
    console,
    err_console,
    fail,
    folder_given,
    resolve_hive,
    shown_path,
)
from hivemind.cli.hive_status import HiveStatus, hive_status
from hivemind.cli.init_cmd import init_command
from hivemind.cli.mcp_status import print_mcp_servers
from hivemind.cli.spend import AgentSpend, spend_today
from hivemind.cli.task_list import STATES, list_tasks
from hivemind.daemon.status_file import DaemonStatus
from hivemind.errors import FileFormatError, UserError
from hivemind.hive import frontmatter
from hivemind.hive.document import Document, parse
from hivemind.hive.frontmatter import task_from_document
from hivemind.hive.layout import HUMAN
from hivemind.hive.mailbox import BROADCAST, PostOffice
from hivemind.hive.models import Task, TaskPriority
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.trust import ignored_line
from hivemind.printable import printable
from hivemind.problems import first_problem

task_app = typer.Typer(
    help="Give the agents work: each task is a Markdown file in tasks/.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `hivemind` app."""
    app.command("init", short_help="Create a hive: folders, hive.toml, an example agent.")(
        init_command
    )  # here: the commands are listed in the order they are added
    app.add_typer(task_app, name="task", short_help="Give the agents work (files in tasks/).")
    app.command("send", short_help="Send a message from you (human) to agents.")(send_command)
    app.command("status", short_help="Agents, tasks, unread mail, rejected files, the daemon.")(
        status_command
    )


# -- task add --------------------------------------------------------------------


@contextmanager
def _reader_warnings() -> Iterator[list[str]]:
    """The warnings the task file reader logs meanwhile (unknown fields), kept out of
    the log and collected: the command gives the ones that concern it, once each."""
    heard: list[str] = []

    def hold(record: logging.LogRecord) -> bool:
        heard.append(record.getMessage())
        return False

    frontmatter.logger.addFilter(hold)
    try:
        yield heard
    finally:
        frontmatter.logger.removeFilter(hold)


def _task_file(file: Path) -> tuple[Task, Document]:
    """The task `--file` describes (`-`: standard input), validated as a task file
    dropped into tasks/ would be."""
    stdin = str(file) == "-"
    try:
        raw = sys.stdin.buffer.read() if stdin else file.read_bytes()
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        fail(f"{'standard input' if stdin else file}: cannot read the task body: {reason}")
    if stdin:
        file = Path("<stdin>")
    try:
        with _reader_warnings() as heard:
            doc = parse(text, file)
            task = task_from_document(doc)
    except FileFormatError as exc:
        fail(str(exc))
    for warning in dict.fromkeys(heard):
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False,
                          soft_wrap=True)
    return task, doc


@task_app.command("add")
def task_add(
    title: Annotated[str, typer.Argument(help="What to do, in a few words (the task's title).")],
    assignee: Annotated[
        str | None,
        typer.Option(metavar="AGENT",
                     help="The agent that should do it (default: routed by skills, then load)."),
    ] = None,
    priority: Annotated[
        str | None,
        typer.Option(metavar="LEVEL", help="critical, high, medium or low (default: medium).",
                     show_default=False),
    ] = None,
    project: Annotated[
        str | None, typer.Option(metavar="NAME", help="Project the task belongs to.")
    ] = None,
    depends_on: Annotated[
        list[str] | None,
        typer.Option(
            "--depends-on",
            metavar="TASK_ID",
            help="Id of a task that must be done first (repeat, or separate with commas).",
        ),
    ] = None,
    body: Annotated[
        str | None,
        typer.Option("--body", metavar="TEXT",
                     help="The details, under the title (Markdown)."),
    ] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            metavar="PATH",
            help="A Markdown file with the details (`-`: read standard input): its body is "
            "the task's body, and the fields of its front matter count as the task's, where "
            "no option here sets them.",
        ),
    ] = None,
    task_id: Annotated[
        str | None,
        typer.Option("--id", metavar="ID", help="The task id (default: made from the title)."),
    ] = None,
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a task to tasks/ and print the path of its file."""
    where = resolve_hive(hive)
    if not title.strip():
        fail("the title is empty; say in a few words what to do")
    fields: dict[str, Any] = {}  # the command's own options: they win over the file's fields
    if priority is not None:
        try:
            fields["priority"] = TaskPriority(priority.strip().lower())
        except ValueError:
            fail(f"priority must be one of critical, high, medium, low (got {priority!r})")
    agents = where.agent_names()
    if assignee is not None:
        if assignee not in agents:
            fail(f"unknown agent {assignee!r} (agents: {', '.join(agents) or 'none yet'})")
        fields["assignee"] = assignee
    if project is not None:
        fields["project"] = project
    if depends_on is not None:
        fields["depends_on"] = [d.strip() for item in depends_on for d in item.split(",")
                                if d.strip()]  # fmt: skip
    if body is not None and file is not None:
        fail("give the details with --body or with --file, not both")
    heading = f"# {title.strip()}\n"
    details = (body or "").strip("\n")
    data: dict[str, Any] = {"body": f"{heading}\n{details}\n" if details.strip() else heading}
    if file is not None:
        from_file, doc = _task_file(file)
        # Only what the file sets: its defaults (id = the file's name) are not the task's.
        data = from_file.model_dump(include={*doc.front, "extra"} - {"body"})
        data["body"] = doc.body or f"# {title.strip()}\n"
        named = from_file.assignee
        if named is not None and "assignee" not in fields and named not in agents:
            # Refused as `--assignee` is: an agent's name misspelt in the file.
            problem = f"unknown agent {named!r} (agents: {', '.join(agents) or 'none yet'})"
            fail(str(FileFormatError(file, problem, doc.line_of(("assignee",)))))
    board = TaskBoard(where)
    # The board reads task files to find a free id and the dependencies: --file again
    # if it lies in tasks/, the task just written from it, other people's tasks. Their
    # warnings are not this command's to give; --file's own were given above, once.
    with _reader_warnings():
        try:
            task = Task.model_validate({
                **data,
                **fields,
                "id": task_id or data.get("id") or board.new_task_id(title),
                "title": title.strip(),
            })  # fmt: skip
            ref = board.create(task, created_by=HUMAN)
        except UserError as exc:
            fail(str(exc))
        except ValidationError as exc:  # e.g. an --id with a '/'
            fail(first_problem(exc)[1])
        missing = [dep for dep in task.depends_on if board.find(dep) is None]
    for dep in missing:  # a typo, or a task still to be added: say so now
        err_console.print(
            f"[yellow]warning:[/] no task {escape(dep)} on the board yet; {ref.id} "
            "waits until it is in tasks/done/", highlight=False, soft_wrap=True,
        )
    if as_json:
        typer.echo(json.dumps({"id": ref.id, "path": str(ref.path)}))
    else:
        typer.echo(shown_path(ref.path))


@task_app.command("list", short_help="List the tasks on the board, newest first in each state.")
def task_list(
    states: Annotated[
        list[str] | None,
        typer.Option("--state", metavar="STATE",
                     help=f"Only tasks in this state: {', '.join(STATES)} (repeatable; default: "
                     "pending and active)."),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Tasks in every state.")] = False,
    limit: Annotated[
        int, typer.Option(min=0, metavar="N", help="At most this many rows (0: no limit).")
    ] = 50,
    as_json: JsonOption = False,
    hive: HiveOption = None,
) -> None:
    """List the tasks on the board: id, title, who has it, newest first in each state.

    Read only: nothing is moved (a file in tasks/ that cannot be read is shown with its
    problem; the daemon rejects it). Rejected files are shown with their reason.
    """
    where = resolve_hive(hive)
    wanted = list(STATES) if show_all else [s.strip().lower() for s in states or []]
    unknown = [s for s in wanted if s not in STATES]
    if unknown:
        fail(f"no state {', '.join(map(repr, unknown))}; the states are {', '.join(STATES)}")
    rows = list_tasks(where, wanted or ["pending", "active"])
    shown = rows[:limit] if limit else rows
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in shown], ensure_ascii=False))
        return
    if not rows:
        console.print(f"[dim]no {' or '.join(wanted or ['pending', 'active'])} tasks[/]")
        return
    table = Table(title_justify="left")
    table.add_column("state", no_wrap=True)
    table.add_column("id", no_wrap=True, max_width=22)
    table.add_column("title", ratio=1)
    table.add_column("agent", no_wrap=True, max_width=16)
    table.add_column("changed", no_wrap=True)
    today = datetime.now().astimezone().date()
    for r in shown:
        who = r.agent or (f"→ {r.assignee}" if r.assignee else "")
        title = escape(r.title) + (f" [bold]({r.priority})[/]"
                                   if r.priority not in ("", "medium") else "")
        when = r.changed_at.astimezone()
        changed = when.strftime("%H:%M" if when.date() == today else "%Y-%m-%d")
        table.add_row(r.state, escape(r.id),
                      f"[red]{escape(r.problem)}[/]" if r.problem else title,
                      escape(who), changed)  # fmt: skip
    console.print(table)
    if len(rows) > len(shown):
        console.print(f"[dim]… and {len(rows) - len(shown)} more (--limit 0 shows all)[/]")


# -- send ------------------------------------------------------------------------


def send_command(
    text: Annotated[str, typer.Argument(help="The message; `-` reads it from standard input.")],
    to: Annotated[
        list[str],
        typer.Option("--to", metavar="AGENT",
                     help=f"Recipient agent (repeat for several; '{BROADCAST}' = all)."),
    ],
    subject: Annotated[str, typer.Option(metavar="TEXT", help="A short subject line.")] = "",
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send a message from you (`human`) to agents' mailboxes."""
    where = resolve_hive(hive)
    body = sys.stdin.read() if text == "-" else text
    if not body.strip():
        fail("the message is empty")
    if BROADCAST in to and not where.agent_names():
        fail(f"{shown_path(where.root)} has no agents, so --to '{BROADCAST}' reaches no one "
             "(add one: agents/<name>/ROM.md)")  # fmt: skip
    office = PostOffice(where)
    try:
        paths = office.send(HUMAN, to, subject, body)
    except UserError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps([str(p) for p in paths]))
        return
    for path in paths:
        typer.echo(shown_path(path))


# -- status ----------------------------------------------------------------------


def status_command(
    directory: HiveArgument = None,
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show agents (and ROM errors), tasks per state, unread mail and rejected files."""
    where = resolve_hive(folder_given(directory, hive))
    # A ROM's room for a context is told net of the preamble and tool definitions.
    from hivemind.agent.prompt import FixedTokens
    from hivemind.memory.tokens import TokenCounter
    from hivemind.tools import default_registry

    status = hive_status(where, FixedTokens(default_registry(), TokenCounter()))
    spent = spend_today(where, [a.name for a in status.agents])
    if as_json:
        typer.echo(json.dumps({**status.model_dump(mode="json"), "spend_today": {
            name: {"cycles": s.cycles, "tokens": s.tokens, "cost_usd": round(s.cost, 6),
                   "unpriced": bool(s.unpriced)} for name, s in spent.items()}}, indent=2))
        return
    print_status(status, spent)


def print_status(status: HiveStatus, spent: dict[str, AgentSpend] | None = None) -> None:
    """The status as rich tables; errors whole, one per line, to be acted on."""
    console.print(f"[bold]hive[/] {escape(status.root)}", highlight=False)
    if status.config_error:
        console.print(
            f"[bold red]{escape(status.config_error)}[/]", highlight=False, soft_wrap=True
        )
    folder = shown_path(Path(status.root))
    if status.trust is not None and (line := ignored_line(status.trust, "hive.toml", folder)):
        console.print(f"[yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)

    # One line per agent at any width: the role comes last and is cut to what is left.
    agents = Table(title="Agents (tokens and cost: today, UTC)", title_justify="left",
                   box=SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    rows = []
    for a in status.agents:
        today = (spent or {}).get(a.name) or AgentSpend()
        rows.append((a.name, "ok" if a.ok else "invalid", a.model or "", str(a.active_tasks),
                     str(a.unread), f"{today.tokens:,}", today.cost_text(), a.role))
    columns = ("agent", "config", "model", "active", "unread", "tokens", "cost")
    for i, column in enumerate(columns):
        width = max([len(column), *(len(row[i]) for row in rows)])
        agents.add_column(column, justify="right" if i > 2 else "left", no_wrap=True,
                          min_width=width, max_width=width)
    room = max(8, console.width - console.measure(agents).maximum - 3)
    agents.add_column("role", no_wrap=True, max_width=room)
    for row in rows:
        config = "[green]ok[/]" if row[1] == "ok" else "[red]invalid[/]"
        role = row[7] if len(row[7]) <= room else row[7][: room - 1] + "…"
        agents.add_row(escape(row[0]), config, *(escape(cell) for cell in row[2:7]),
                       escape(role))
    console.print(agents if status.agents else "[dim]no agents (add agents/<name>/ROM.md)[/]")
    for a in status.agents:
        if a.paused:
            console.print(f"  [yellow]{escape(a.name)} is {escape(a.paused)}[/]",
                          highlight=False, soft_wrap=True)
        if a.error:
            kept = f" ({a.name} runs on its last good config meanwhile)" if a.last_good else ""
            console.print(f"  [red]{escape(printable(a.error))}[/]{escape(kept)}",
                          highlight=False, soft_wrap=True)
        for warning in a.warnings:  # the error says its file; so does each warning
            console.print(f"  [yellow]{escape(printable(f'agents/{a.name}/ROM.md: {warning}'))}[/]",
                          highlight=False, soft_wrap=True)

    tasks = Table(title="Tasks", title_justify="left")
    for state in status.tasks:
        tasks.add_column(state.value, justify="right")
    tasks.add_row(*(str(n) for n in status.tasks.values()))
    console.print(tasks)

    mail = Table(title="Unread mail", title_justify="left")
    mail.add_column("mailbox")
    mail.add_column("unread", justify="right")
    for name, count in status.mail.items():
        mail.add_row(escape(name), str(count))
    console.print(mail)

    if status.rejected:
        console.print("[bold]Rejected files[/] (fix them, then drop them into tasks/ again)")
        for item in status.rejected:
            line = f"  {escape(item.file)}: [red]{escape(item.reason)}[/]"
            console.print(line, highlight=False, soft_wrap=True)

    if status.no_agent:
        console.print("[bold]Waiting for an agent the hive does not have[/]")
        for line in status.no_agent:
            console.print(f"  [yellow]{escape(line)}[/]", highlight=False, soft_wrap=True)

    if status.not_tasks:
        console.print("[bold]Not read as tasks[/] (a task is a tasks/*.md file)")
        for why in status.not_tasks:
            console.print(f"  [yellow]{escape(why)}[/]", highlight=False, soft_wrap=True)

    if isinstance(status.daemon, dict):
        _print_daemon(status.daemon)
    else:
        console.print("[dim]daemon: none has run here yet (no .hivemind/status.json); "
                      "`hivemind run` starts one[/]", highlight=False, soft_wrap=True)


def _print_daemon(d: dict[str, Any]) -> None:
    """The daemon's last status.json: running or why it stopped, tokens, errors per agent."""
    if d.get("error"):  # status.json unreadable: `hive_status` says why
        console.print(f"[bold]daemon[/] state unknown: {escape(str(d['error']))}",
                      highlight=False, soft_wrap=True)
        return
    status = DaemonStatus.parse(d)  # (`hive_status` read it so: it parses)
    pid = escape("?" if status.pid is None else str(status.pid))
    if status.running and d.get("stale"):  # locked, status.json not written
        state = (f"[green]running[/] (pid {pid}), but its status file is stale: the daemon "
                 "cannot write it (is the disk full?)")
    elif status.running:  # checked against the process by `hive_status`
        state = f"[green]running[/] (pid {pid})"
    elif d.get("killed"):
        state = f"[yellow]not running[/] (pid {pid} is gone; it was killed)"
    else:
        state = f"stopped ({escape(status.stopped_because or 'reason not recorded')})"
    details = [state]
    if status.provider:
        details.append(f"provider {escape(status.provider)}")
    if status.updated_at:
        details.append(f"updated {escape(status.updated_at[:19])}")
    console.print("[bold]daemon[/] " + ", ".join(details), highlight=False)
    if status.agents:
        table = Table(title="Agents at run time", title_justify="left")
        for column in ("agent", "state", "cycles", "tokens today", "last error"):
            table.add_column(column, justify="right" if column in ("cycles", "tokens today")
                             else "left")
        for name, a in status.agents.items():
            error = a.last_error or a.config_error or ""
            table.add_row(escape(name), escape(a.state), str(a.cycles),
                          f"{a.tokens_today:,}", f"[red]{escape(error)}[/]")
        console.print(table)
        print_mcp_servers(status.mcp_servers)
        for name, a in status.agents.items():
            for tid, why in a.waiting.items():
                console.print(f"  {escape(name)}: {escape(tid)} waits for "
                              f"{escape(why)}", highlight=False, soft_wrap=True)
            for why in a.refused:
                console.print(f"  {escape(name)}: [yellow]{escape(why)}[/]",
                              highlight=False, soft_wrap=True)
    totals = status.totals
    tokens = sum(totals.usage.values())
    console.print(
        f"this run: {totals.cycles} cycles, {totals.tasks_done} done, "
        f"{totals.tasks_failed} failed, {tokens:,} tokens, "
        f"cache hit share {totals.cache_hit_share:.0%}"
        + (f", ${totals.cost_usd:.4f}" if totals.cost_usd else "")
        + (f" (no price in \\[pricing] for {escape(', '.join(totals.unpriced_models))})"
           if totals.unpriced_models else ""),
        highlight=False,
    )
    for item in status.waiting_tasks:
        console.print(f"  waiting: {escape(item.id)} ({escape(item.why)})", highlight=False)
