"""`hivemind log`: what the agents did, all of them interleaved by time (or some), one
line an event; `-f` follows every agent's audit log as it grows."""

from __future__ import annotations

import heapq
import json
import re
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from hivemind.agent.audittail import Position, read_last, read_new
from hivemind.agent.record import AnyRecord
from hivemind.cli.common import HiveOption, JsonOption, console, err_console, fail, resolve_hive
from hivemind.cli.logview import LogView
from hivemind.hive.layout import Hive

DEFAULT_LAST = 50
FOLLOW_EVERY = 0.5  # seconds between looks at the audit logs with --follow
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)", re.IGNORECASE)
_UNIT = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}
_EARLIEST = datetime.min.replace(tzinfo=UTC)

Entry = tuple[str, AnyRecord]  # (agent, record)


def register(app: typer.Typer) -> None:
    """Add `log` to the `hivemind` app."""

    @app.command(
        "log",
        short_help="What the agents did, by time: model text, tool calls, tasks.",
        epilog="Examples: hivemind log -f   |   hivemind log lead --since 2h   |   "
        "hivemind log -n 0 -f (only what comes next)",
    )
    def log(
        agent: Annotated[
            str | None,
            typer.Argument(metavar="AGENT",
                           help="Only this agent (default: every agent, interleaved by time).",
                           show_default=False),
        ] = None,
        agents: Annotated[
            list[str] | None,
            typer.Option("--agent", metavar="AGENT",
                         help="Only this agent (repeat for several)."),
        ] = None,
        follow: Annotated[
            bool, typer.Option("--follow", "-f", help="Keep printing what the agents do, as "
                               "they do it, until Ctrl-C.")
        ] = False,
        since: Annotated[
            str | None,
            typer.Option("--since", metavar="WHEN",
                         help="Only what happened since then: an age (30s, 10m, 2h, 3d) or a "
                         "time (14:30, 2026-11-26, 2026-11-26T14:30).", show_default=False),
        ] = None,
        last: Annotated[
            int | None,
            typer.Option("--last", "-n", min=0, metavar="N",
                         help=f"Only the last N records (default: {DEFAULT_LAST}, or all with "
                         "--since); 0: none of the old ones (with -f: only what comes next).",
                         show_default=False),
        ] = None,
        hive_opt: HiveOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Show what the agents did, interleaved by time: each cycle's start and end
        (tokens, cost, time), what the model said, each tool call with its arguments and
        result, budgets, ROM errors. One line an event: time, agent, task, what.

        --json prints the audit records as they are written (one JSON object a line,
        with its agent)."""
        hive = resolve_hive(hive_opt)
        chosen = _chosen(hive, [*([agent] if agent else []), *(agents or [])])
        names = chosen or _logged_agents(hive)
        after = parse_since(since) if since is not None else None
        count = last if last is not None else (None if after is not None else DEFAULT_LAST)
        positions: dict[str, Position] = {}
        per_agent: dict[str, list[AnyRecord]] = {}
        for name in names:
            read = read_last(hive.audit_path(name), count, after)
            for note in read.notes:
                err_console.print(Text(note, style="dim"), soft_wrap=True)
            per_agent[name], positions[name] = read.records, read.at
        entries = list(merged(per_agent))
        if count is not None:
            entries = entries[max(0, len(entries) - count):]
        view = LogView(agent_width=max((len(n) for n in names), default=0))
        if not entries and not as_json and count != 0:  # JSON lines: no record, no line
            console.print(Text(_nothing(hive, chosen, since)), style="dim", soft_wrap=True)
        show(view, entries, as_json)
        if follow:
            _follow(hive, view, positions, as_json, every_agent=not chosen)


def _chosen(hive: Hive, given: list[str]) -> list[str]:
    """The agents named (no repeats); a name of no agent, and with no audit log, is refused."""
    known = hive.agent_names()
    out: list[str] = []
    for name in given:
        # An agent since removed still has its log; a path is no agent's name.
        plain = name == Path(name).name and not name.startswith(".")
        if name not in known and not (plain and hive.audit_path(name).exists()):
            fail(f"no agent {name!r} in {hive.root} (agents: {', '.join(known) or 'none'})")
        if name not in out:
            out.append(name)
    return out


def _logged_agents(hive: Hive) -> list[str]:
    """Every agent of the hive, and every agent with an audit log (one since removed)."""
    try:
        logged = [p.stem for p in hive.audit_dir.glob("*.jsonl") if not p.name.startswith(".")]
    except OSError:
        logged = []
    return sorted({*hive.agent_names(), *logged})


def _nothing(hive: Hive, chosen: list[str], since: str | None) -> str:
    when = f" since {since}" if since else " yet"
    if len(chosen) == 1:
        return (f"no audit records for {chosen[0]}{when} "
                f"({hive.relative(hive.audit_path(chosen[0]))})")
    return f"no audit records{when} ({hive.relative(hive.audit_dir)}/)"


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`--since`: an age (`10m`, `2h`, `3d`, `1w`, `30s`) or a local time (`14:30`,
    `2026-11-26`, `2026-11-26T14:30`, with a zone if given); one line if neither."""
    now = now or datetime.now().astimezone()
    given = text.strip()
    age = _AGE.fullmatch(given)
    if age:
        return now - timedelta(seconds=float(age[1]) * _UNIT[age[2].lower()])
    try:
        when = datetime.fromisoformat(given)
    except ValueError:
        try:
            clock = datetime.strptime(given, "%H:%M:%S" if given.count(":") == 2 else "%H:%M")
        except ValueError:
            fail(f"--since {text!r}: not an age or a time; give one like 10m, 2h, 3d, 14:30 "
                 "or 2026-11-26T14:30", code=2)
        when = now.replace(hour=clock.hour, minute=clock.minute, second=clock.second,
                           microsecond=0, tzinfo=None)
    return when if when.tzinfo else when.astimezone()


def merged(per_agent: dict[str, list[AnyRecord]]) -> Iterator[Entry]:
    """Every agent's records, in time order (a record without a time keeps its place
    after the one before it in its file)."""

    def keyed(name: str, records: list[AnyRecord]) -> Iterator[tuple[datetime, Entry]]:
        when = _EARLIEST
        for rec in records:
            when = rec.time or when
            yield when, (name, rec)

    streams = [keyed(name, records) for name, records in sorted(per_agent.items())]
    for _, entry in heapq.merge(*streams, key=lambda pair: pair[0]):
        yield entry


def show(view: LogView, entries: Iterable[Entry], as_json: bool) -> None:
    """Print the entries: lines for people, or the records as JSON lines."""
    for name, rec in entries:
        if as_json:
            given = rec.as_json()
            out = given if "agent" in given else {**given, "agent": name}
            console.out(json.dumps(out, ensure_ascii=False, default=str), highlight=False)
            continue
        for line in view.lines(name, rec):
            console.print(line, soft_wrap=True)


def _follow(hive: Hive, view: LogView, positions: dict[str, Position], as_json: bool,
            every_agent: bool) -> None:
    """Print what is written to the audit logs from `positions` on, until Ctrl-C; with
    `every_agent`, the logs of agents that start meanwhile too, from their start."""
    try:
        while True:
            time.sleep(FOLLOW_EVERY)
            if every_agent:
                for name in _logged_agents(hive):
                    positions.setdefault(name, Position())
                    view.agent_width = max(view.agent_width, len(name))
            per_agent: dict[str, list[AnyRecord]] = {}
            for name, at in positions.items():
                read = read_new(hive.audit_path(name), at)
                for note in read.notes:
                    err_console.print(Text(note, style="yellow"), soft_wrap=True)
                positions[name] = read.at
                if read.records:
                    per_agent[name] = read.records
            show(view, merged(per_agent), as_json)
    except KeyboardInterrupt:
        return
