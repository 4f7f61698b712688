"""`hivemind inbox`: your mail (mailboxes/human/): list it, read a message, answer it."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from hivemind.cli.common import HiveOption, JsonOption, console, fail, resolve_hive, shown_path
from hivemind.errors import UserError
from hivemind.hive.inbox import Inbox
from hivemind.hive.layout import HUMAN
from hivemind.hive.mailbox import MailItem

inbox_app = typer.Typer(
    help="Your mail: what the agents wrote to you (mailboxes/human/). Without a command, "
    "list it: every unread message and the newest read ones, newest first.",
    invoke_without_command=True,
)

IdArgument = Annotated[
    str,
    typer.Argument(metavar="ID", help="The message's id as `hivemind inbox` shows it (its "
                   "first characters are enough when no other id starts the same)."),
]


def register(app: typer.Typer) -> None:
    """Add `inbox` to the `hivemind` app."""
    app.add_typer(inbox_app, name="inbox", short_help="Your mail: list, read and answer it.")


@inbox_app.callback()
def inbox_list(
    ctx: typer.Context,
    read_shown: Annotated[
        int, typer.Option("-n", min=0, metavar="N",
                          help="Read messages shown besides the unread ones.")
    ] = 10,
    show_all: Annotated[bool, typer.Option("--all", help="Every read message too.")] = False,
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """List your mail: every unread message (marked *) and the newest read ones, newest
    first, with id, sender, subject and date. Read one with `hivemind inbox read ID`."""
    if ctx.invoked_subcommand is not None:
        return
    inbox = Inbox(resolve_hive(hive))
    items = inbox.listing(sys.maxsize if show_all else read_shown)
    short = inbox.short_ids()
    if as_json:
        typer.echo(json.dumps([_as_json(i) for i in items], ensure_ascii=False))
        return
    unread, read = inbox.counts()
    if not items:
        console.print(f"[dim]no mail in mailboxes/{HUMAN}/[/]")
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("", "id", "from", "subject", "date"):
        table.add_column(column, no_wrap=column != "subject", overflow="fold")
    for item in items:
        m = item.message
        style = "" if item.read else "bold"
        table.add_row("" if item.read else "*", Text(short.get(item.path.stem, m.id), style),
                      Text(m.from_, style), Text(m.subject or "(no subject)", style),
                      _when(m.sent_at))  # fmt: skip
    console.print(table)
    hidden = read - sum(1 for i in items if i.read)
    more = f"; {hidden} older read (--all)" if hidden else ""
    console.print(f"[dim]{unread} unread, {read} read{more}. "
                  "hivemind inbox read ID shows one[/]", highlight=False)


@inbox_app.command("read", short_help="Show a message and mark it read.")
def inbox_read(
    message_id: IdArgument,
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a message and mark it read (it moves from new/ to cur/)."""
    inbox = Inbox(resolve_hive(hive))
    item = _find(inbox, message_id)
    inbox.mark_read(item)
    if as_json:
        typer.echo(json.dumps(_as_json(item, body=True), ensure_ascii=False))
        return
    m = item.message
    rows = [("From", m.from_), ("To", m.to), ("Subject", m.subject), ("Date", _when(m.sent_at)),
            ("Task", m.task or ""), ("Thread", m.thread or ""),
            ("In reply to", m.in_reply_to or ""), ("Id", m.id)]  # fmt: skip
    for name, value in rows:
        if value:
            console.print(Text.assemble((f"{name + ':':<12}", "bold"), value), soft_wrap=True)
    if m.extra.get("error"):
        console.print(Text(f"(not a valid message file: {m.extra['error']}; shown as is)",
                           style="yellow"), soft_wrap=True)
    console.print()
    console.print(Text(m.body.rstrip("\n")), soft_wrap=True)
    short = inbox.short_ids().get(item.path.stem, m.id)
    console.print(Text(f"\nhivemind inbox reply {short} \"...\" answers it",
                       style="dim"), soft_wrap=True)


@inbox_app.command("reply", short_help="Answer a message, in its thread.")
def inbox_reply(
    message_id: IdArgument,
    text: Annotated[str, typer.Argument(help="Your answer; `-` reads it from standard input.")],
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer a message: a message from you to its sender, in the same thread (its
    in_reply_to set); the message answered is marked read."""
    inbox = Inbox(resolve_hive(hive))
    item = _find(inbox, message_id)
    body = sys.stdin.read() if text == "-" else text
    if not body.strip():
        fail("the answer is empty")
    try:
        path = inbox.reply(item, body)
    except UserError as exc:
        fail(str(exc))
    inbox.mark_read(item)
    if as_json:
        typer.echo(json.dumps({"to": item.message.from_, "path": str(path)}))
        return
    console.print(Text(f"sent to {item.message.from_}: {shown_path(path)}"), soft_wrap=True)


def _find(inbox: Inbox, message_id: str) -> MailItem:
    try:
        return inbox.find(message_id)
    except UserError as exc:
        fail(str(exc))


def _when(sent: datetime | None) -> str:
    if sent is None:
        return ""
    local = sent.astimezone()
    today = datetime.now().astimezone().date()
    return local.strftime("%H:%M" if local.date() == today else "%Y-%m-%d %H:%M")


def _as_json(item: MailItem, body: bool = False) -> dict[str, Any]:
    m = item.message
    out: dict[str, Any] = {
        "id": m.id, "from": m.from_, "to": m.to, "subject": m.subject,
        "sent_at": m.sent_at.isoformat() if m.sent_at else None, "read": item.read,
        "thread": m.thread, "in_reply_to": m.in_reply_to, "task": m.task,
        "path": str(item.path),
    }  # fmt: skip
    if body:
        out["body"] = m.body
    return out

