"""The summary `hivemind run` prints when it stops (a table, or JSON), and what did not
end well, item by item with its reason (see `daemon.outcome` for the exit codes)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from hivemind.cli.common import console
from hivemind.daemon.daemon import Daemon
from hivemind.daemon.idle import IdleState
from hivemind.daemon.outcome import DISK_FULL, Trouble
from hivemind.daemon.status import RunTotals

SHOWN = 10  # items of a list printed, the rest counted


def cost_text(t: RunTotals, offline: bool) -> str:
    """The run's estimated cost, and what it leaves out."""
    if offline:
        return "$0 (offline provider: no model called)"
    return f"${t.cost:.4f}" + (" + unknown (see below)" if t.unpriced else "")


def stall_text(s: IdleState, waiting: list[tuple[str, str]], shown: int = SHOWN,
               reason: str = "stalled") -> Text:
    """Why `--until-idle` stopped with work left: what is left, and what each task waits
    for (file names and reasons as written, never read as markup)."""
    mail = ", ".join(f"{box} {n}" for box, n in sorted(s.unread.items()) if n)
    head = {"model-unavailable": "the model service is still away, given up waiting: ",
            DISK_FULL: "the disk is still full, given up waiting for space: ",
            }.get(reason, "nothing more can happen without you: ")
    text = Text.assemble(
        (head, "yellow"),
        f"{s.pending} pending, {s.active} active task(s), "
        + (f"unread mail: {mail}" if mail else "no unread mail"),
    )
    if waiting:
        text.append("; waiting: " + "; ".join(f"{tid} ({why})" for tid, why in waiting[:shown]))
        if len(waiting) > shown:
            text.append(f"; and {len(waiting) - shown} more")
    return text


def summary_json(daemon: Daemon, seconds: float, reason: str, found: list[Trouble],
                 code: int) -> dict[str, Any]:
    """The summary for scripts: why it stopped, the exit code, the totals, what did not
    end well (each with its reason), what waits, the last errors."""
    return {
        "stopped_because": reason,
        "exit_code": code,
        "provider": daemon.services.provider.name,
        "wall_seconds": round(seconds, 3),
        **daemon.totals.as_dict(),
        "problems": [t.as_dict() for t in found],
        "waiting": [{"task": t, "why": why} for t, why in daemon.waiting]
        if daemon.stalled is not None else [],
        "last_errors": {name: r.agent.last_error for name, r in daemon.runners.items()
                        if r.agent.last_error},
    }


def print_summary(daemon: Daemon, seconds: float, reason: str,
                  found: list[Trouble] | None = None) -> None:
    t = daemon.totals
    table = Table(title=f"hivemind run — stopped: {reason}", show_header=False)
    u = t.usage
    rows = [
        ("provider", daemon.services.provider.name),
        ("tasks done / failed", f"{t.tasks_done} / {t.tasks_failed}"),
        ("cycles", f"{t.cycles} ({t.errors} with errors)"),
        ("tool calls", str(t.tool_calls)),
        ("tokens in / out", f"{u.total_input} / {u.output_tokens}"),
        ("cache hit share", f"{u.cache_hit_share:.0%}"),
        ("cost (estimate)", cost_text(t, daemon.services.provider.offline)),
        ("wall time", f"{seconds:.1f} s"),
    ]
    for k, v in rows:
        table.add_row(k, Text(v))  # as written, never read as markup
    console.print(table)
    if t.unpriced:
        console.print(Text(
            f"cost: no price in hive.toml [pricing] for {', '.join(sorted(t.unpriced))}; "
            "its tokens are not in the estimate."
        ), soft_wrap=True)
    if daemon.stalled is not None:
        console.print(stall_text(daemon.stalled, daemon.waiting, reason=reason),
                      soft_wrap=True)
    for item in (found or [])[:SHOWN * 2]:
        console.print(Text.assemble((f"{item.kind}: ", "red"), f"{item.name}: {item.reason}"),
                      soft_wrap=True)
    if found and len(found) > SHOWN * 2:
        console.print(Text(f"and {len(found) - SHOWN * 2} more (see --json)"), soft_wrap=True)
    named = {item.name for item in found or [] if item.kind == "paused"}
    for name, runner in daemon.runners.items():
        if runner.agent.last_error and name not in named:  # left for the next run: why
            console.print(Text.assemble((f"{name}, last error: ", "red"),
                                        runner.agent.last_error), soft_wrap=True)
