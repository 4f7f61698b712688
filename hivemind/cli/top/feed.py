"""The events `top` lists, and an agent's recent turns, from its audit records.

An audit record is someone else's file: every field is checked for its type before
it is shown, and everything shown is cut to one short line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

KINDS = ("claimed", "done", "failed", "mail", "rom", "error", "steer")
"""The kinds of event the feed shows (`steer`: a pause or a retry made in `top`)."""

ARG_CHARS = 40
RESULT_CHARS = 100


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
    """`value` (text, or anything JSON shows) on one line of at most `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _ids(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _calls(rec: dict[str, Any]) -> list[dict[str, Any]]:
    calls = rec.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def events_of(
    agent: str, records: Iterable[dict[str, Any]], holding: set[str]
) -> Iterator[FeedEvent]:
    """The feed's events in `agent`'s new audit records (each has `_at`); `holding`:
    the tasks it worked on at its last cycle start, kept by the caller."""
    for rec in records:
        at, kind = rec["_at"], rec.get("event")
        if kind == "cycle_start":
            for tid in _ids(rec.get("tasks")):
                if tid not in holding:
                    yield FeedEvent(at, agent, "claimed", f"works on {tid}")
            holding.clear()
            holding.update(_ids(rec.get("tasks")))
        elif kind == "cycle":
            yield from _cycle_events(agent, at, rec)
        elif kind in ("error", "config_error"):
            what = "ROM invalid" if kind == "config_error" else "error"
            yield FeedEvent(at, agent, "error", f"{what}: {one_line(rec.get('error'), 160)}")
        elif kind == "config_fixed":
            yield FeedEvent(at, agent, "rom", "ROM.md valid again: reloaded")
        elif kind == "interrupted":
            yield FeedEvent(at, agent, "error", f"cycle {rec.get('cycle')} was interrupted")


def _cycle_events(agent: str, at: datetime, rec: dict[str, Any]) -> Iterator[FeedEvent]:
    fx = _dict(rec.get("effects"))
    read = len(_ids(rec.get("mail")))
    if read:
        yield FeedEvent(at, agent, "mail", f"read {read} message(s)")
    for call in _calls(rec):
        args = _dict(call.get("input"))
        if call.get("name") == "send_message" and not call.get("error"):
            yield FeedEvent(at, agent, "mail", f"mail to {one_line(args.get('to'), 30)}: "
                            f"{one_line(args.get('subject') or '', 60)}")
    for tid in _ids(fx.get("tasks_completed")):
        yield FeedEvent(at, agent, "done", f"done {tid}")
    for tid in _ids(fx.get("tasks_failed")):
        yield FeedEvent(at, agent, "failed", f"failed {tid}")
    if rec.get("error"):
        yield FeedEvent(at, agent, "error", f"error: {one_line(rec.get('error'), 160)}")


def call_line(call: dict[str, Any]) -> str:
    """`name(arg=value, …) → result`, arguments and result shortened."""
    args = _dict(call.get("input"))
    shown = ", ".join(f"{k}={one_line(v, ARG_CHARS)}" for k, v in args.items())
    mark = "✗" if call.get("error") else "→"
    return (f"{one_line(call.get('name'), 40)}({shown}) {mark} "
            f"{one_line(call.get('result') or '', RESULT_CHARS)}")


def turns(records: Iterable[dict[str, Any]]) -> list[str]:
    """An agent's recent cycles as lines of text: when, the tasks, what the model
    said, each tool call shortened, and how it ended."""
    out: list[str] = []
    for rec in records:
        at: datetime = rec["_at"]
        tasks = ", ".join(_ids(rec.get("tasks"))) or "no task"
        out.append(f"── cycle {rec.get('cycle')} at {at.astimezone():%H:%M:%S} · {tasks}")
        text = rec.get("text")
        if isinstance(text, str) and text.strip():
            out.extend(f"  {printable(line)}" for line in text.strip().splitlines())
        for call in _calls(rec):
            out.append(f"  ▸ {call_line(call)}")
        if rec.get("error"):
            out.append(f"  error: {one_line(rec.get('error'), 200)}")
    return out or ["no cycle in its audit log yet"]
