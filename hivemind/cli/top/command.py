"""`hivemind top`: the command; the dashboard itself is `top.app`."""

from __future__ import annotations

import sys

import typer

from hivemind.cli.common import HiveArgument, HiveOption, fail, folder_given, resolve_hive


def register(app: typer.Typer) -> None:
    """Add `top` to the `hivemind` app."""
    app.command("top", short_help="Watch the hive live; pause agents, retry tasks.")(
        top_command
    )


def top_command(directory: HiveArgument = None, hive: HiveOption = None) -> None:
    """Watch a hive live: agents (state, task in hand, what the model last said, tokens
    and cost today), tasks by state with the newest of each, and a feed of events.

    It reads the hive's files only (status.json, the audit logs, the task folders), so it
    watches a daemon started anywhere, or says "no daemon". Keys: p pauses or resumes
    the selected agent, r retries the selected failed or rejected task, c (or Enter)
    shows the agent's recent turns, Tab moves between panels, q quits.
    """
    where = resolve_hive(folder_given(directory, hive))
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Without a terminal the dashboard would write escape codes into a pipe forever.
        fail("hivemind top needs a terminal (its input or output is not one); "
             "`hivemind status` (--json for scripts) shows the hive once, "
             "`hivemind log -f` follows what the agents do")
    from hivemind.cli.top.app import TopApp  # textual loads only for this command

    TopApp(where).run()
