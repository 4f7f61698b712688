"""The events `top` lists, and an agent's recent turns, from its audit records.

The records are read through their models (`agent.record`); what a model took from a
hive's file as it was (a tool call's input and result) is someone else's text, cut
to one short line and its control characters shown as `?` before it is shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from hivemind.agent.record import (
    CycleFailed,
    CycleRecord,
    CycleStart,
    Interrupted,
    RomFixed,
    RomProblem,
    ToolCallRecord,
)
from hivemind.cli.logview import ARG_CHARS, RESULT_CHARS
from hivemind.cli.logview import one_line as log_line

KINDS = ("claimed", "done", "failed", "mail", "rom", "error", "steer")
"""The kinds of event the feed shows (`steer`: a pause, a resume, a retry)."""



@dataclass(frozen=True)
class FeedEvent:
    at: datetime
    agent: str
    kind: str
    text: str


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with its control characters (an escape sequence a model or a file put
    there) shown as `?`, never sent to the terminal."""
    return _CONTROL.sub("?", text)


def one_line(value: object, limit: int) -> str:
    """`value` (text, or anything JSON shows) on one line of at most `limit` characters,
    as `hivemind log` shows it, its control characters as `?`."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    return printable(log_line(text, limit))


Record = CycleStart | CycleRecord | CycleFailed | Interrupted | RomProblem | RomFixed
SHOWN = (CycleStart, CycleRecord, CycleFailed, Interrupted, RomProblem, RomFixed)
"""The kinds of audit record the feed and the turns show; the others are not kept."""


def events_of(agent: str, records: Iterable[Record], holding: set[str]) -> Iterator[FeedEvent]:
    """The feed's events in `agent`'s new audit records; `holding`: the tasks it worked
    on at its last cycle start, kept by the caller."""
    for rec in records:
        at = rec.time
        if at is None:
            continue
        if isinstance(rec, CycleStart):
            for tid in rec.tasks:
                if tid not in holding:
                    yield FeedEvent(at, agent, "claimed", f"works on {one_line(tid, 80)}")
            holding.clear()
            holding.update(rec.tasks)
        elif isinstance(rec, CycleRecord):
            yield from _cycle_events(agent, at, rec)
        elif isinstance(rec, CycleFailed | RomProblem):
            what = "ROM invalid" if isinstance(rec, RomProblem) else "error"
            yield FeedEvent(at, agent, "error", f"{what}: {one_line(rec.error or '', 160)}")
        elif isinstance(rec, RomFixed):
            yield FeedEvent(at, agent, "rom", "ROM.md valid again: reloaded")
        else:
            yield FeedEvent(at, agent, "error", f"cycle {rec.cycle} was interrupted")


def _cycle_events(agent: str, at: datetime, rec: CycleRecord) -> Iterator[FeedEvent]:
    if rec.mail:
        yield FeedEvent(at, agent, "mail", f"read {len(rec.mail)} message(s)")
    for call in rec.tool_calls:
        args = call.input if isinstance(call.input, dict) else {}
        if call.name == "send_message" and not call.error:
            yield FeedEvent(at, agent, "mail", f"mail to {one_line(args.get('to'), 30)}: "
                            f"{one_line(args.get('subject') or '', 60)}")
    for tid in rec.effects.tasks_completed:
        yield FeedEvent(at, agent, "done", f"done {one_line(tid, 80)}")
    for tid in rec.effects.tasks_failed:
        yield FeedEvent(at, agent, "failed", f"failed {one_line(tid, 80)}")
    if rec.error:
        yield FeedEvent(at, agent, "error", f"error: {one_line(rec.error, 160)}")


def call_line(call: ToolCallRecord) -> str:
    """`name(arg=value, …) → result`, arguments and result shortened."""
    args = call.input if isinstance(call.input, dict) else {}
    shown = ", ".join(f"{one_line(k, 30)}={one_line(v, ARG_CHARS)}" for k, v in args.items())
    mark = "✗" if call.error else "→"
    return (f"{one_line(call.name or '?', 40)}({shown}) {mark} "
            f"{one_line(call.result or '', RESULT_CHARS)}")


def turns(records: Iterable[CycleRecord]) -> list[str]:
    """An agent's recent cycles as lines of text: when, the tasks, what the model
    said, each tool call shortened, and how it ended."""
    out: list[str] = []
    for rec in records:
        at = rec.time
        when = f"{at.astimezone():%H:%M:%S}" if at is not None else "?"
        tasks = one_line(", ".join(rec.tasks), 120) or "no task"
        out.append(f"── cycle {rec.cycle} at {when} · {tasks}")
        out.extend(f"  {printable(line)}" for line in rec.text.strip().splitlines())
        out.extend(f"  ▸ {call_line(call)}" for call in rec.tool_calls)
        if rec.error:
            out.append(f"  error: {one_line(rec.error, 200)}")
    return out or ["no cycle in its audit log yet"]
