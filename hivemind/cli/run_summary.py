"""The summary `hivemind run` prints when it stops (a table, or JSON), and what did not
end well, item by item with its reason (see `daemon.outcome` for the exit codes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from hivemind.cli.common import console, counted, shown_path
from hivemind.cli.spend import AgentSpend
from hivemind.daemon.daemon import Daemon
from hivemind.daemon.idle import IdleState
from hivemind.daemon.outcome import DISK_FULL, Trouble
from hivemind.daemon.status import RunTotals
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox

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
                 code: int, spend: dict[str, AgentSpend] | None = None) -> dict[str, Any]:
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
        "agents": {name: {"cycles": a.cycles, "tokens": a.tokens,
                          "cost_usd": round(a.cost, 6), "unpriced_models": sorted(a.unpriced)}
                   for name, a in sorted((spend or {}).items())},
        "results": {k: str(v) for k, v in results(daemon.hive).items()},
    }


def per_agent_rows(spend: dict[str, AgentSpend], offline: bool,
                   shown: int = SHOWN) -> list[tuple[str, str]]:
    """A row an agent (the costliest first, `shown` of them): its cycles, tokens, cost."""
    order = sorted(spend.items(), key=lambda kv: (-kv[1].cost, -kv[1].tokens, kv[0]))
    rows = []
    for name, a in order[:shown]:
        cost = "" if offline else f", ${a.cost:.4f}" + (" + unknown" if a.unpriced else "")
        rows.append((f"  {name}", f"{a.cycles} cycle{'s' if a.cycles != 1 else ''}, "
                                  f"{a.tokens:,} tokens{cost}"))
    if len(order) > shown:
        rest = order[shown:]
        cost = "" if offline else f", ${sum(a.cost for _, a in rest):.4f}"
        rows.append((f"  {len(rest)} more agents",
                     f"{sum(a.tokens for _, a in rest):,} tokens{cost}"))
    return rows


def results(hive: Hive) -> dict[str, Path]:
    """Where a run's results are: finished tasks, what the agents wrote, your mail."""
    return {"done": hive.done_dir, "failed": hive.failed_dir, "workspace": hive.workspace_dir,
            "mail": hive.mailbox_dir(HUMAN) / "new"}


def results_text(hive: Hive, shown_in: Hive | None, done: int, failed: int) -> Text:
    """`results: 3 tasks done in tasks/done/, files in workspace/, 2 unread messages for
    you (...)`."""
    where = results(hive)
    same = shown_in is not None and hive.root == shown_in.root

    def path(key: str) -> str:
        # As the person would type it: relative to the hive they named (scratch: its path).
        if same:
            return where[key].relative_to(hive.root).as_posix() + "/"
        return shown_path(where[key]) + "/"

    unread = Mailbox(hive, HUMAN).count_unread()
    parts = [f"{counted(done, 'task', 'done')} in {path('done')}"]
    if failed:
        parts.append(f"{failed} failed in {path('failed')}")
    parts.append(f"what the agents wrote in {path('workspace')}")
    inbox = "hivemind inbox" + ("" if same else f" --hive {shown_path(hive.root)}")
    parts.append(f"{counted(unread, 'unread message')} for you in {path('mail')} ({inbox})"
                 if unread else "no unread mail for you")
    return Text.assemble(("results: ", "bold"), "; ".join(parts))


def print_summary(daemon: Daemon, seconds: float, reason: str,
                  found: list[Trouble] | None = None,
                  spend: dict[str, AgentSpend] | None = None,
                  shown_in: Hive | None = None) -> None:
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
    if spend:
        rows.append(("per agent", ""))
        rows.extend(per_agent_rows(spend, daemon.services.provider.offline))
    for k, v in rows:
        table.add_row(k, Text(v))  # as written, never read as markup
    console.print(table)
    console.print(results_text(daemon.hive, shown_in, t.tasks_done, t.tasks_failed),
                  soft_wrap=True)
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
