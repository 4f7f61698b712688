"""`hivemind agents import`: agent files from elsewhere (Claude Code's) as the hive's agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from hivemind.cli.common import (
    HiveOption,
    JsonOption,
    console,
    fail,
    resolve_hive,
    shown_path,
)
from hivemind.errors import ConfigError
from hivemind.hive.agentimport import agent_files, import_agent
from hivemind.hive.config import load_config
from hivemind.settings import AgentSettings

agents_app = typer.Typer(
    help="The hive's agents: each is a folder agents/<name>/ with its ROM.md.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add `agents` to the `hivemind` app."""
    app.add_typer(agents_app, name="agents",
                  short_help="Add agents from Claude Code agent files (agents import).")


@agents_app.command("import", short_help="Copy agent files (Claude Code's) in as agents.")
def import_command(
    source: Annotated[
        Path,
        typer.Argument(help="A folder of agent files, such as .claude/agents (or one file, "
                       "or a project whose .claude/agents/ holds them).", show_default=False),
    ],
    hive: HiveOption = None,
    as_json: JsonOption = False,
) -> None:
    """Copy each agent file of SOURCE (a Claude Code subagent file, `.claude/agents/*.md`,
    or a ROM) to agents/<name>/ROM.md, unchanged: `name:` names the agent, else the
    file's name. An agent that already has a ROM.md is left as it is (kept), and a file
    that is no valid ROM is not copied (exit code 1); one line per file says which.

    Claude Code tool names become the hive's (Read → read_file, Grep → search_files, ...);
    those no hive tool matches (Bash, WebFetch, ...) are left out, as `hivemind status`
    says. Example: hivemind agents import ~/project/.claude/agents
    """
    where = resolve_hive(hive)
    if not source.exists():
        fail(f"{shown_path(source)}: no such folder or file")
    files = agent_files(source)
    if not files:
        fail(f"{shown_path(source)}: no agent files (*.md) in it")
    try:
        defaults = load_config(where).config.agents
    except ConfigError:  # `status` says what is wrong with hive.toml; the ROMs are checked
        defaults = AgentSettings()
    results = [import_agent(where, path, defaults) for path in files]
    if as_json:
        typer.echo(json.dumps([
            {"file": str(r.source), "agent": r.name, "rom": r.rom,
             "reason": r.reason or None, "kept": r.kept, "skipped": r.skipped,
             "warnings": r.warnings}
            for r in results
        ], indent=2))
    for r in results if not as_json else ():
        shown = escape(shown_path(r.source))
        if r.rom is None:
            said = ("[yellow]kept[/]" if r.kept else "[dim]skipped[/]" if r.skipped
                    else "[red]not imported[/]")
            console.print(f"{said} {shown}: {escape(r.reason)}", highlight=False,
                          soft_wrap=True)
            continue
        told = f" [yellow]({escape('; '.join(r.warnings))})[/]" if r.warnings else ""
        console.print(f"[green]imported[/] {shown} → {escape(r.rom)}{told}",
                      highlight=False, soft_wrap=True)
    # Run again, an import keeps the agents it made: only a file to fix is a failure.
    if any(r.rom is None and not (r.kept or r.skipped) for r in results):
        raise typer.Exit(1)
