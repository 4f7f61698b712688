"""`hivemind task show`, `task cancel`, `task reassign`: one task, looked at or steered."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import typer
from rich.markup import escape

from hivemind.cli.common import (
    HiveOption,
    JsonOption,
    console,
    err_console,
    fail,
    resolve_hive,
    shown_path,
)
from hivemind.cli.task_history import TaskCycle, task_cycles
from hivemind.errors import UserError
from hivemind.hive.document import dump_front, parse
from hivemind.hive.frontmatter import task_front
from hivemind.hive.models import TaskState
from hivemind.hive.taskcontrol import Changed, Located, cancel, dependents, locate, reassign

TaskIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The task's id (its file name without .md).")
]

# The sections the runtime appends when a task ends or is changed by hand.
_OUTCOME = re.compile(r"^## (Result|Attempt \d+ failed|Cancelled)[ \t]*$", re.MULTILINE)


def register(task_app: typer.Typer) -> None:
    """Add this module's commands to `hivemind task`."""
    task_app.command("show", short_help="One task: its fields, text, outcome and cycles.",
                     epilog="Example: hivemind task show fix-the-login-bug")(task_show)
    task_app.command("cancel", short_help="Stop a pending or active task (→ tasks/failed/).",
                     epilog="Example: hivemind task cancel fix-the-login-bug --reason "
                     "'a duplicate of t7'")(task_cancel)
    task_app.command("reassign", short_help="Give a pending or active task to another agent.",
                     epilog="Example: hivemind task reassign fix-the-login-bug bob")(
        task_reassign
    )


def _located(hive_opt: Any, task_id: str) -> tuple[Any, Located]:
    where = resolve_hive(hive_opt)
    try:
        return where, locate(where, task_id)
    except UserError as exc:
        fail(str(exc))


def task_show(task_id: TaskIdArgument, hive: HiveOption = None,
              as_json: JsonOption = False) -> None:
    """Show one task in any state: where it is, who holds or finished it, its front
    matter and text, its result or why it failed or was rejected, and the cycles the
    agents spent on it (from their audit logs). Nothing is changed."""
    where, found = _located(hive, task_id)
    cycles = task_cycles(where, found.task_id)
    front, body = _front_and_body(found)
    outcome = _outcome(found, body)
    if as_json:
        typer.echo(json.dumps({
            "id": found.task_id, "state": found.state.value, "path": str(found.path),
            "holder": found.holder, "front": front, "body": body, "outcome": outcome,
            "problem": found.problem, "cycles": [c.model_dump() for c in cycles],
        }, ensure_ascii=False, default=str, indent=2))  # fmt: skip
        return
    head = f"[bold]{escape(found.task_id)}[/] {found.state.value}, {escape(shown_path(found.path))}"
    console.print(head, highlight=False, soft_wrap=True)
    who = _who(found, cycles)
    if who:
        console.print(who, highlight=False, markup=False, soft_wrap=True)
    if outcome:
        label = "result" if found.state is TaskState.DONE else "reason"
        console.print(f"[bold]{label}:[/] {escape(outcome)}", highlight=False, soft_wrap=True)
    if front:
        console.print("\n" + dump_front(front).rstrip("\n"), highlight=False, markup=False,
                      soft_wrap=True)
    if body.strip():
        console.print("\n" + body.strip("\n"), highlight=False, markup=False, soft_wrap=True)
    console.print()
    if not cycles:
        console.print("[dim]no cycle worked on it yet (no audit record names it)[/]")
        return
    console.print(f"[bold]cycles[/] ({len(cycles)})")
    for c in cycles:
        console.print(_cycle_line(c), highlight=False, markup=False, soft_wrap=True)


def _front_and_body(found: Located) -> tuple[dict[str, Any], str]:
    """The file's front matter as written (the person's fields and the runtime's), and
    its body; for a file that cannot be read, nothing."""
    if found.task is None:
        return {}, found.text  # as it is, if it could be read at all
    try:
        doc = parse(found.text, found.path)
        return dict(doc.front), doc.body
    except UserError:
        front = json.loads(json.dumps(task_front(found.task), default=str))
        return front, found.task.body


def _outcome(found: Located, body: str) -> str:
    """A finished task's result or reason (its last outcome section, first lines), a
    rejected file's reason, or ""."""
    if found.state is TaskState.REJECTED:
        return found.problem or ""
    if found.problem:
        return found.problem
    if found.state not in (TaskState.DONE, TaskState.FAILED):
        return ""
    last = next(reversed(list(_OUTCOME.finditer(body))), None)
    if last is None:
        return ""
    text = " ".join(body[last.end():].split("\n## ", 1)[0].split())
    heading = last.group(1)
    return text if heading in ("Result", "Cancelled") else f"{heading}: {text}"


def _who(found: Located, cycles: list[TaskCycle]) -> str:
    task = found.task
    parts = []
    if found.holder:
        parts.append(f"held by {found.holder}")
    elif task is not None and task.agent and found.state in (TaskState.DONE, TaskState.FAILED):
        parts.append(f"{found.state.value} by {task.agent}")
    if task is not None and task.assignee:
        parts.append(f"assigned to {task.assignee}")
    worked = list(dict.fromkeys(c.agent for c in cycles if c.outcome != "created"))
    if worked:
        parts.append(f"worked on by {', '.join(worked)}")
    if task is not None and task.attempts:
        parts.append(f"{task.attempts} failed attempt(s)")
    return "; ".join(parts)


def _cycle_line(c: TaskCycle) -> str:
    head = f"  {c.at[:19].replace('T', ' ')}  {c.agent}" + (f" #{c.cycle}" if c.cycle else "")
    bits = [c.outcome] if c.outcome else []
    if c.calls:
        bits.append(", ".join(c.calls))
    if c.tokens:
        bits.append(f"{c.tokens:,} tokens")
    if c.error:
        bits.append(f"error: {' '.join(c.error.split())[:160]}")
    line = head + ("  " + "; ".join(bits) if bits else "")
    return line + (f"\n      said {c.said}" if c.said else "")


def task_cancel(
    task_id: TaskIdArgument,
    reason: Annotated[
        str,
        typer.Option("--reason", metavar="TEXT", help="Why, in a few words (added to the reason)."),
    ] = "",
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a pending or active task: it moves to tasks/failed/ with the reason
    "cancelled by human". The agent holding it is told by mail, and its tool calls on
    the task are refused from then on. A done or failed task cannot be cancelled."""
    where = resolve_hive(hive)
    try:
        changed = cancel(where, task_id, reason)
    except UserError as exc:
        fail(str(exc))
    if _echo_json(changed, as_json):
        return
    told = f"; {changed.holder} was told" if changed.holder else ""
    typer.echo(f"{changed.task_id}: cancelled, now {shown_path(changed.path)}{told}")
    waiting = dependents(where, changed.task_id)
    if waiting:
        err_console.print(
            f"[yellow]warning:[/] {escape(', '.join(waiting))} "
            f"{'depends' if len(waiting) == 1 else 'depend'} on {escape(changed.task_id)} and "
            "will wait for it until cancelled too or its depends_on is edited",
            highlight=False, soft_wrap=True,
        )


def task_reassign(
    task_id: TaskIdArgument,
    agent: Annotated[str, typer.Argument(metavar="AGENT", help="The agent to give it to.")],
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """Give a pending or active task to AGENT (its `assignee` is set). A task another
    agent holds goes back to tasks/ for AGENT to claim, and that agent is told by mail."""
    where = resolve_hive(hive)
    try:
        changed = reassign(where, task_id, agent)
    except UserError as exc:
        fail(str(exc))
    if _echo_json(changed, as_json):
        return
    told = f"; {changed.holder} was told" if changed.holder else ""
    typer.echo(f"{changed.task_id}: assigned to {agent}, {shown_path(changed.path)}{told}")


def _echo_json(changed: Changed, as_json: bool) -> bool:
    if as_json:
        typer.echo(json.dumps({"id": changed.task_id, "path": str(changed.path),
                               "told": changed.holder}))
    return as_json
