"""A held task as its person left it: ending it waits for their writer, and an edit
made while the model thought is shown to the model before the task may end.

A person may edit a task the agent holds at any time (`>> tasks/active/a/t.md`). The
completion must take the file once its writer has closed it (DESIGN §3: half-written
files are not read), and the model must see what the person added: a task ended on
the text it saw before the edit would drop the person's request unread.
"""

from __future__ import annotations

from dataclasses import replace

from hivemind.errors import ToolError
from hivemind.fs.settling import fallback_for, until_whole
from hivemind.hive.tasks.ref import TaskRef
from hivemind.tools.base import ToolContext

WRITER_LIMIT = 60.0
"""Seconds an ending task waits for a writer that holds its file open."""
SHOWN_CHARS = 20_000
"""Of an edited task's new text, shown to the model in the tool's answer."""


async def check_as_seen(ctx: ToolContext, ref: TaskRef) -> TaskRef:
    """The held task once its file is whole; ToolError if a writer still holds it, or
    if it changed since the model was shown it (the answer then shows the new text,
    and the next call to end it goes through)."""
    if not await until_whole(ref.path, fallback_for(ctx.board.settle_time), WRITER_LIMIT):
        raise ToolError(
            f"task {ref.id} is being edited ({ctx.hive.relative(ref.path)} has been open "
            f"for writing for {WRITER_LIMIT:g} s); end it once the edit is saved"
        )
    now = ctx.board.check_held(ref, ctx.agent)
    if (now.body, now.title) == (ref.task.body, ref.task.title):
        return ref
    kept = {"status": ref.task.status, "agent": ref.task.agent,
            "claimed_at": ref.task.claimed_at}  # the claim's, which the file does not hold
    ctx.active_tasks[ref.id] = replace(ref, task=now.model_copy(update=kept))  # seen now
    text = now.body
    if len(text) > SHOWN_CHARS:
        text = text[:SHOWN_CHARS] + f"\n…(cut; the whole task is {ctx.hive.relative(ref.path)})"
    raise ToolError(
        f"task {ref.id} was edited while you worked on it, so it was not ended; it now "
        f"reads:\n\n{text}\n\nDo what it asks now, then end it again."
    )
