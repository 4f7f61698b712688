"""Audit records as lines a person reads: time, agent, task, what happened.

One line an event: a cycle's start, what the model said (one line, shortened), each
tool call (name, shortened arguments, result), its end (tokens, cost, time). The
file's text is shown as is, never read as console markup.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.text import Text

from hivemind.agent.record import (
    AnyRecord,
    BudgetNotice,
    CycleFailed,
    CycleRecord,
    CycleStart,
    Interrupted,
    RomFixed,
    RomProblem,
)
from hivemind.printable import printable

SAID_CHARS = 200  # of the model's text, on its one line
ARG_CHARS = 40  # of one argument of a tool call
ARGS_CHARS = 120  # of all its arguments
RESULT_CHARS = 100  # of its result
TASK_WIDTH = 16  # the task column (a longer id pushes the rest along)


def one_line(value: object, limit: int | None = None) -> str:
    """`value` on one line (whitespace runs become one space), cut to `limit` with `…`;
    a control character (a hive file's escape sequence, read by a tool) shows as U+FFFD."""
    text = printable(" ".join(str(value).split()), one_line=True)
    if limit is not None and len(text) > limit:
        return text[: max(0, limit - 1)] + "…"
    return text


Parts = list[str | tuple[str, str]]


class LogView:
    """Turns one agent's records into lines; `agent_width` aligns the agent column."""

    def __init__(self, agent_width: int = 0, today: datetime | None = None) -> None:
        self.agent_width = agent_width
        self.today = (today or datetime.now().astimezone()).date()

    def lines(self, agent: str, rec: AnyRecord) -> list[Text]:
        """The lines of one record."""
        stamp = self._time(rec)
        n = f"#{rec.cycle} " if rec.cycle is not None else ""
        out: list[tuple[str, Parts]] = []
        if isinstance(rec, CycleStart):
            held = task_column(rec.tasks)
            news = _counted(len(rec.mail), "new message") if rec.mail else "no new mail"
            what = (f"tasks {', '.join(rec.tasks)}" if len(rec.tasks) > 1
                    else _counted(len(rec.tasks), "task"))
            out.append((held, [f"{n}start: {what}, {news}"]))
        elif isinstance(rec, CycleRecord):
            out.extend(self._cycle(rec, n))
        elif isinstance(rec, BudgetNotice) and rec.warned is not None:
            what, _, which = rec.warned.partition(":")
            told = (f"task {which} stopped: its token budget is spent" if what == "task"
                    else f"paused: its daily token budget for {which} is spent")
            out.append((which if what == "task" else "", [("budget ", "yellow"),
                                                          f"{told} (human was told)"]))
        elif isinstance(rec, RomProblem):
            out.append(("", [("ROM error ", "red"), one_line(rec.error or "?")]))
        elif isinstance(rec, RomFixed):
            out.append(("", [("ROM fixed", "green")]))
        elif isinstance(rec, Interrupted):
            out.append((task_column(rec.tasks), [("interrupted ", "yellow"),
                                                 f"{n}{interrupted(rec)}"]))
        elif isinstance(rec, CycleFailed):
            out.append(("", [(f"{n}error: {one_line(rec.error or '?')}", "red")]))
        else:
            given = rec.as_json()
            rest = {k: v for k, v in given.items() if k not in ("event", "at", "cycle", "agent")}
            out.append(("", [(str(rec.event), "yellow"),
                             f" {n}{one_line(_compact(rest), 300)}".rstrip()]))
        return [self._line(stamp, agent, task, parts) for task, parts in out]

    def _cycle(self, rec: CycleRecord, n: str) -> list[tuple[str, Parts]]:
        held = task_column(rec.tasks)
        out: list[tuple[str, Parts]] = []
        if rec.text:  # what the model said: its answer, even one no tool took
            out.append((held, [("said ", "cyan"), one_line(rec.text, SAID_CHARS)]))
        for call in rec.tool_calls:
            mark = ("✗ ", "red") if call.error else ("✓ ", "green")
            given: dict[str, Any] = call.input if isinstance(call.input, dict) else {}
            task = call_task(given, rec.tasks) or held
            out.append((task, [mark, call.name or "?",
                               f" {arguments(given)}" if given else "",
                               f" → {one_line(call.result, RESULT_CHARS)}"
                               if call.result is not None else ""]))
        for why in rec.effects.refusals:
            out.append((held, [("refused ", "yellow"), one_line(why, 200)]))
        for op in rec.effects.memories:
            text = memory_op(op)
            if text:
                out.append((held, [("memory ", "cyan"), text]))
        if rec.followup:
            out.append((task_column(rec.followup), [("follow-up", "yellow"),
                        " held work waits on nothing: another cycle at once"]))
        if rec.ended:  # the turn's end with no closing model call, and why
            out.append((held, [("turn over", "green"), f": {one_line(rec.ended, 100)} "
                               "(no closing model call)"]))
        if rec.error:
            out.append((held, [(f"error: {one_line(rec.error)}", "red")]))
        out.append((held, [f"{n}end: " + _cycle_figures(rec)]))
        return out

    def _time(self, rec: AnyRecord) -> str:
        when = rec.time
        if when is None:
            return "?".ljust(8)
        local = when.astimezone()
        return local.strftime("%H:%M:%S" if local.date() == self.today else "%Y-%m-%d %H:%M:%S")

    def _line(self, stamp: str, agent: str, task: str, parts: Parts) -> Text:
        task = task or "-"
        return Text.assemble((stamp, "dim"), " ", (agent.ljust(self.agent_width), "bold"),
                             " ", (task.ljust(TASK_WIDTH), "magenta"), " ", *parts)


def task_column(tasks: list[str]) -> str:
    """The task a line is about: its id; of several, the first and how many more."""
    if len(tasks) > 1:
        return f"{tasks[0]} +{len(tasks) - 1}"
    return tasks[0] if tasks else ""


def call_task(given: dict[str, Any], held: list[str]) -> str | None:
    """The task a tool call is for: the one it names (`task_id`, `task`), else the one
    held whose id its path, subject or title names (`workspace/<id>.md`)."""
    named = given.get("task_id") or given.get("task")
    if isinstance(named, str) and named:
        return named
    if len(held) < 2:
        return None
    words = " ".join(str(given.get(k) or "") for k in ("path", "subject", "title"))
    hits = [t for t in held if t in words]
    return max(hits, key=len) if hits else None


def arguments(given: dict[str, Any]) -> str:
    """A tool call's arguments on one line: `path=notes.md body="Dear Ann, …"`."""
    shown = []
    for key, value in given.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                                 default=str)
        text = one_line(text, ARG_CHARS)
        if isinstance(value, str) and (" " in text or not text):
            text = json.dumps(text, ensure_ascii=False)
        shown.append(f"{key}={text}")
    return one_line(" ".join(shown), ARGS_CHARS)


def interrupted(rec: Interrupted) -> str:
    """What an `interrupted` record tells: a cycle that started and never ended, and what
    it held (its tasks stayed in active/, its mail in new/: the next run took them up)."""
    started = str(rec.started_at or "")[:19]
    text = f"the cycle started {started} never ended" if started else "the cycle never ended"
    text += " (the daemon stopped or was killed mid-cycle)"
    held = []
    if rec.tasks:
        held.append(f"{'task' if len(rec.tasks) == 1 else 'tasks'} {', '.join(rec.tasks)}")
    if rec.mail:
        held.append(f"mail {', '.join(rec.mail)}")
    if held:
        plural = len(held) > 1 or held[0].startswith("tasks")
        text += f"; its {' and '.join(held)} {'were' if plural else 'was'} left for the next run"
    return text


def memory_op(op: dict[str, Any]) -> str | None:
    """One line for a long-term memory operation of a cycle (None: nothing to show)."""
    kind = op.get("op")
    if kind in ("context", "recall"):
        found = [r for r in op.get("results") or [] if isinstance(r, dict)]
        if not found and kind == "context":
            return None  # the common case: nothing recalled for the context
        shown = ", ".join(f"{r.get('id')} ({float(r.get('score') or 0):.2f})" for r in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        what = "in the context" if kind == "context" else "recalled"
        query = one_line(op.get("query") or "")[:60]
        return f"{what}: {shown or 'nothing'}{more} (for {query!r})"
    if kind == "end_task":
        parts = [f"{len(op[k])} {k}" for k in ("consolidated", "promoted", "cleared", "pruned")
                 if op.get(k)]
        if op.get("value_updates"):
            parts.append(f"{len(op['value_updates'])} values learned")
        if not parts:
            return None
        return f"task {op.get('task_id')} ended: {', '.join(parts)}"
    if kind == "remember":
        return f"{op.get('status', 'stored')} {op.get('id')} ({op.get('tier', '?')})"
    if kind == "rate":
        asked, rated = len(op.get("asked") or []), len(op.get("rated") or {})
        if op.get("error"):
            return f"importance rating of {asked} memories failed: {op['error']}"
        tokens = op.get("tokens")
        return f"importance rated by the model: {rated} of {asked} memories ({tokens} tokens)"
    return None


def _cycle_figures(rec: CycleRecord) -> str:
    """`3 tool calls, 3,531 tokens, $0.0123, 21 ms, context 4 kept, 0 dropped`."""
    parts = [_counted(len(rec.tool_calls), "tool call"), f"{rec.tokens:,} tokens"]
    if rec.cost is not None:
        parts.append(f"${rec.cost:.4f}")
    ms = rec.duration_ms
    if ms is not None:
        parts.append(f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:g} ms")
    given = rec.model_fields_set
    if "kept" in given or "dropped" in given:
        parts.append(f"context {len(rec.kept)} kept, {len(rec.dropped)} dropped")
    return ", ".join(parts)


def _counted(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _compact(rest: dict[str, Any]) -> str:
    return ", ".join(f"{k}={one_line(v, 80)}" for k, v in rest.items()) if rest else ""
