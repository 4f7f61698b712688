"""`hivemind run`: the daemon, its console lines and its summary."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Annotated

import typer
from rich.text import Text

from hivemind.cli.common import (
    HiveArgument,
    HiveOption,
    console,
    err_console,
    fail,
    folder_given,
    resolve_hive,
    shown_path,
)
from hivemind.cli.run_feed import RunFeed, startup_text
from hivemind.cli.run_summary import print_summary, summary_json
from hivemind.cli.scratch import scratch_copy
from hivemind.daemon.configwatch import read_hive_toml
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.outcome import BoardBefore, outcome
from hivemind.errors import ConfigError
from hivemind.hive.config import LoadedConfig, load_config
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.trust import ignored_line
from hivemind.llm.select import BASE_URL_ENV, credential, make_provider, wants_offline


def _provider_lines(loaded: LoadedConfig, shown_file: str, folder: str) -> list[str]:
    """What of hive.toml's `[provider]` is not used, and why: not trusted, or the
    environment's endpoint wins (one line each)."""
    lines = [line] if (line := ignored_line(loaded.trust, shown_file, folder)) else []
    file_url = loaded.config.provider.base_url
    if file_url is not None and os.environ.get(BASE_URL_ENV):
        lines.append(f"{shown_file}: [provider] base_url not used: ${BASE_URL_ENV} is set, "
                     "and the environment wins")
    return lines


def _pending(hive: Hive) -> int:
    """Task files waiting in tasks/ (a count of names: nothing is read)."""
    try:
        return sum(1 for n in os.listdir(hive.tasks_dir) if n.endswith(".md")
                   and not is_temp_name(n))
    except OSError:
        return 0


def _agents_to_run(given: str | None, hive: Hive) -> list[str] | None:
    """The names of `--agents a,b` (None: all); no name, or a name of no agent, is refused."""
    if given is None:
        return None
    names = [a.strip() for a in given.split(",") if a.strip()]
    known = hive.agent_names()
    if not names:
        fail(f"--agents {given!r} names no agent; give names like a,b or leave the option out "
             f"to run all (agents: {', '.join(known) or 'none'})")  # fmt: skip
    unknown = sorted(set(names) - set(known))
    if unknown:
        fail(f"no such agent: {', '.join(unknown)} (agents: {', '.join(known) or 'none'})")
    return names


def register(app: typer.Typer) -> None:
    @app.command("run", short_help="Run the agents (until stopped, or until idle).")
    def run(
        directory: HiveArgument = None,
        hive_opt: HiveOption = None,
        until_idle: Annotated[
            bool, typer.Option("--until-idle", help="Exit once no task or unread mail is left.")
        ] = False,
        agents: Annotated[
            str | None,
            typer.Option("--agents", metavar="NAMES", help="Run only these agents: a,b,c."),
        ] = None,
        max_cycles: Annotated[
            int | None,
            typer.Option("--max-cycles", min=1, metavar="N", help="Stop after N think-cycles."),
        ] = None,
        poll: Annotated[
            bool, typer.Option("--poll", help="Poll the folder (network filesystems).")
        ] = False,
        scratch: Annotated[
            bool,
            typer.Option(
                "--scratch",
                help="Run on a fresh copy in .hivemind/scratch/, leaving your files untouched.",
            ),
        ] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No line per cycle.")] = False,
        as_json: Annotated[
            bool,
            typer.Option("--json", help="At the end, print the run's summary as JSON (and no "
                         "line per cycle); notices go to stderr."),
        ] = False,
        offline: Annotated[
            bool,
            typer.Option("--offline", help="Use the offline provider: no model is called; "
                         "agents work mechanically and every output says so."),
        ] = False,
        workers: Annotated[
            int | None,
            typer.Option(
                "--workers", min=1, max=64, metavar="N",
                help="Spread the agents over N processes, one core each (default: "
                "[daemon] workers of hive.toml, else auto: one process per core, one for "
                "every 16 agents at most). The cap on model calls is shared among them.",
            ),
        ] = None,
    ) -> None:
        """Run the hive: agents wake when tasks, mail or their ROM change, and think.

        Claude needs ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN); with --offline no model is
        called and every output says so. Stop with Ctrl-C; in-flight cycles finish first.

        Exit code: 0 when every task it touched ended done and nothing failed; 1 when it
        refused to start; 2 on a wrong command line or a runtime failure; 3 when work is
        left that cannot move without you (or the model service stayed away, or the disk
        stayed full, or --until-idle was cut short with tasks in hand); 4 when a task
        failed or was rejected, or an agent is paused or has an invalid ROM (the summary
        lists each, with its reason).
        """
        hive = original = resolve_hive(folder_given(directory, hive_opt))
        names = _agents_to_run(agents, hive)
        out = err_console if as_json else console  # stdout holds the JSON alone
        first = load_config(hive)
        if not wants_offline(first.config.provider, offline):
            try:  # none and no --offline: refused before anything runs
                credential(first.config.provider)
            except ConfigError as exc:
                hint = ignored_line(first.trust, hive.relative(hive.config_file),
                                    shown_path(hive.root))
                fail(f"{exc}. {hint}" if hint and "api_key_env" in first.trust.ignored
                     else str(exc))
        if scratch:
            hive, left_out = scratch_copy(hive)
            for line in left_out:
                out.print(Text(line, style="yellow"), soft_wrap=True)
            out.print(f"running on a scratch copy: {hive.root}", highlight=False)
        hive_toml = read_hive_toml(hive)  # first: an edit from here on is told, not missed
        loaded = load_config(hive, trusted_as=original)
        config = loaded.config
        shown_file, folder = hive.relative(hive.config_file), shown_path(original.root)
        for line in _provider_lines(loaded, shown_file, folder):
            out.print(Text(line, style="yellow"), soft_wrap=True)
        provider = make_provider(config.provider, offline=offline)
        if provider.offline:
            asked = "--offline" if offline else '\\[provider] name = "offline" in hive.toml'
            out.print(
                f"[bold yellow]OFFLINE PROVIDER[/] ({asked}): no model is called: agents "
                "acknowledge, summarise and complete tasks mechanically, and every output "
                "is marked \\[offline].",
                highlight=False,
            )
        secret = "" if provider.offline else credential(config.provider)[1]
        # Kept running: a line an event (start-up, tasks taken and ended, errors);
        # --until-idle: a line a cycle.
        feed = RunFeed(hive, out, events=not (until_idle or quiet or as_json),
                       cycles=not (quiet or as_json))
        daemon = Daemon(
            hive, config, provider,
            RunOptions(until_idle=until_idle, agents=names, max_cycles=max_cycles, poll=poll,
                       workers=workers),
            secrets=(secret,) if secret else (),
            on_cycle=feed.on_cycle,
            hive_toml=hive_toml,
            trusted_as=original,
        )
        if feed.events:
            out.print(startup_text(hive, config, provider.name, names, _pending(hive)),
                      soft_wrap=True)
        started, before = time.monotonic(), BoardBefore.of(hive)
        with feed:
            reason = asyncio.run(daemon.run())
        seconds = time.monotonic() - started
        found, code = outcome(hive, before, daemon.runners.values(), reason, until_idle)
        if as_json:
            typer.echo(json.dumps(summary_json(daemon, seconds, reason, found, code,
                                               feed.spend)))
        else:
            print_summary(daemon, seconds, reason, found, feed.spend, shown_in=original)
        if code:
            raise typer.Exit(code)
