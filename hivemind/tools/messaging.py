"""send_message: mail to another agent, several, everyone ("*") or `human`.

The runtime sets `from`; the model cannot.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from hivemind.errors import ToolError
from hivemind.fs.steps import run_async
from hivemind.hive.layout import HUMAN
from hivemind.memory.blocks import BlockType, MessageBlock
from hivemind.memory.mailids import PREFIX, mail_entry_id
from hivemind.tools.base import Footprint, Tool, ToolContext
from hivemind.tools.limits import thread_key


class SendMessageInput(BaseModel):
    to: str | list[str] = Field(
        description='Agent name(s), "human", or "*" (everyone)'
    )
    subject: str = Field(default="", max_length=200)
    body: str = Field(min_length=1, max_length=100_000)
    in_reply_to: str | None = Field(default=None, description="id of the mail answered")
    task: str | None = Field(default=None, description="task id it is about")


async def send_message(ctx: ToolContext, args: SendMessageInput) -> str:
    names = [args.to] if isinstance(args.to, str) else args.to
    if not [n for n in names if n.strip()]:
        raise ToolError('no recipient: give an agent name, "human", a list, or "*"')
    if ctx.agent in names:
        # Its own mail would wake it again and again, each a model call: notes to
        # itself go in workspace/ (or `remember`), not in its mailbox.
        raise ToolError("you cannot send mail to yourself; keep notes in workspace/ instead")
    fields: dict[str, str] = {}
    if args.in_reply_to:
        fields["in_reply_to"], fields["thread"] = await _answered(ctx, args.in_reply_to)
    if args.task:
        fields["task"] = args.task
    key = thread_key(fields.get("thread"), args.task, args.subject)
    if ctx.conversations is not None:
        # A loop between two agents that only talk: cut past the limit (see `limits`).
        others = [n for n in ctx.post.recipients(ctx.agent, args.to) if n != HUMAN]
        refusal = ctx.conversations.refusal(ctx.config, others, key)
        if refusal is not None:
            raise ctx.refuse(refusal)
    # Only the wait for the disk (fsync) leaves the event loop; other agents' flushes
    # share it.
    paths = await run_async(
        ctx.post.send_steps(ctx.agent, args.to, args.subject, args.body, **fields)
    )
    recipients = [p.parent.parent.name for p in paths]
    ctx.effects.messages_sent.extend(p.stem for p in paths)
    if ctx.conversations is not None:
        ctx.conversations.said(recipients, key)
    if ctx.on_mail is not None:
        ctx.on_mail(recipients)
    if not paths:
        return "not delivered (duplicate message id)"
    return f"delivered to {', '.join(recipients)}"


async def _answered(ctx: ToolContext, given: str) -> tuple[str, str]:
    """(message id, thread) of the mail answered, named by its entry's id (`msg:…`, what
    the model is shown) or by its message id: from the mail in view, else from the name
    of the agent's mail file the entry id is made of (the thread: its own id)."""
    for block in ctx.working.by_type(BlockType.MESSAGE):
        if isinstance(block, MessageBlock) and given in (block.id,
                                                         block.metadata.get("message_id")):
            message_id = str(block.metadata.get("message_id") or given)
            return message_id, str(block.metadata.get("thread") or message_id)
    if given.startswith(PREFIX):
        name = await asyncio.to_thread(_mail_file_named, ctx.hive.mailbox_dir(ctx.agent), given)
        if name is not None:
            given = name.removesuffix(".md")
    return given, given


def _mail_file_named(mailbox: Path, entry_id: str) -> str | None:
    """The name of the mail file in `mailbox` (read or not) whose entry id is `entry_id`."""
    for folder in ("cur", "new"):
        try:
            with os.scandir(mailbox / folder) as found:
                for entry in found:
                    if mail_entry_id(entry.name) == entry_id:
                        return entry.name
        except OSError:
            continue
    return None


MESSAGING_TOOLS: list[Tool[Any]] = [
    Tool(
        "send_message",
        "Send mail.",  # (the runtime sets `from`: the input has no such field)
        SendMessageInput,
        send_message,
        # Each message is a new file under a unique id: nothing it reads can change.
        touches=Footprint.of(writes=["mail"]),
    )
]
