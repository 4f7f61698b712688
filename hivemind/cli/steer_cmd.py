"""`hivemind pause`, `resume` and `task retry`: steer a hive, running or not."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hivemind.cli.common import HiveOption, console, fail, resolve_hive, shown_path
from hivemind.cli.hive_cmds import task_app
from hivemind.cli.hive_status import daemon_status
from hivemind.errors import ConfigError, UserError
from hivemind.hive import steering
from hivemind.hive.config import load_config
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.settings import AgentSettings

AgentArgument = Annotated[str, typer.Argument(help="The agent's name (its folder in agents/).",
                                              show_default=False)]


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `hivemind` app."""
    app.command("pause", short_help="Pause an agent: it takes no task and no mail.")(
        pause_command
    )
    app.command("resume", short_help="Resume a paused agent.")(resume_command)
    task_app.command("retry", short_help="Put a failed or rejected task back in tasks/.")(
        retry_command
    )


def rom_disabled(hive: Hive, agent: str) -> bool:
    """True if the agent's ROM says `enabled: false` (its last good config does)."""
    try:
        defaults = load_config(hive).config.agents
    except ConfigError:
        defaults = AgentSettings()
    try:
        return not RomRegistry(hive, defaults).load(agent).enabled
    except UserError:
        return False


def runtime_pause(hive: Hive, agent: str) -> str | None:
    """Why the running daemon paused `agent` itself (its state in status.json), or None."""
    d: Any = daemon_status(hive)
    if not isinstance(d, dict) or not d.get("running"):
        return None
    a = (d.get("agents") or {}).get(agent)
    if not isinstance(a, dict):
        return None
    state = str(a.get("state") or "")
    return state if state.startswith("paused") else None


def pause_command(agent: AgentArgument, hive: HiveOption = None) -> None:
    """Pause an agent: it takes no new task and reads no mail; the tasks it holds go
    back to tasks/ once its cycle in flight ends (those assigned to it wait for it).

    The pause is kept in .hivemind/pauses/ (not in the ROM, which is often committed),
    so it outlives a restart. `hivemind resume AGENT` lifts it. A ROM's `enabled: false`
    pauses an agent too.
    """
    where = resolve_hive(hive)
    try:
        steering.pause(where, agent)
    except UserError as exc:
        fail(str(exc))
    running = runtime_pause(where, agent) is not None or _daemon_runs(where)
    console.print(
        f"[yellow]paused[/] {agent}"
        + (": the running daemon gives its tasks back after its cycle in flight"
           if running else " (no daemon runs now: the pause holds when one starts)"),
        highlight=False,
    )


def resume_command(agent: AgentArgument, hive: HiveOption = None) -> None:
    """Resume an agent: lifts a pause made with `hivemind pause`, and one the daemon made
    itself after the model API refused the agent's key or model.

    An agent whose ROM says `enabled: false` stays paused until its ROM says otherwise.
    """
    where = resolve_hive(hive)
    if not where.is_agent(agent):
        names = where.agent_names()
        fail(f"unknown agent {agent!r} (agents: {', '.join(names) or 'none yet'})")
    by_daemon = runtime_pause(where, agent)
    mine = steering.read_pause(steering.pause_path(where, agent))
    disabled = rom_disabled(where, agent)
    if (mine is None or not mine.paused) and by_daemon is None:
        if disabled:
            fail(f"{agent} is paused by its ROM (enabled: false); set `enabled: true` in "
                 f"{shown_path(where.rom_path(agent))} to resume it")
        fail(f"{agent} is not paused")
    if by_daemon is not None and "budget" in by_daemon:
        fail(f"{agent} is paused because its daily token budget is spent: it resumes "
             f"tomorrow (UTC), or raise budget.per_day in {shown_path(where.rom_path(agent))}")
    try:
        steering.resume(where, agent)
    except UserError as exc:
        fail(str(exc))
    still = (f"; it stays paused by its ROM (enabled: false) until "
             f"{shown_path(where.rom_path(agent))} says otherwise") if disabled else ""
    console.print(f"[green]resumed[/] {agent}{still}", highlight=False)


def _daemon_runs(hive: Hive) -> bool:
    d: Any = daemon_status(hive)
    return isinstance(d, dict) and bool(d.get("running"))


def retry_command(
    task_id: Annotated[str, typer.Argument(metavar="ID", help="The task's id (its file name "
                                           "without .md in tasks/failed/ or tasks/rejected/).",
                                           show_default=False)],
    hive: HiveOption = None,
) -> None:
    """Put a failed or rejected task back in tasks/ to be done again.

    A failed task keeps its history (each failed attempt, with its reason) and its
    attempts start again. A rejected file is read again first: while it still cannot be
    read, it stays in tasks/rejected/ and the reason is printed.
    """
    where = resolve_hive(hive)
    try:
        done = steering.retry(where, task_id)
    except UserError as exc:
        fail(str(exc))
    console.print(f"[green]retried[/] {done.id}: back in {shown_path(done.path)} "
                  f"(was {done.was.value})", highlight=False)
