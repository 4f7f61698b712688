"""`hivemind run` (the daemon) and `hivemind log` (the audit trail, readable)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
from rich.markup import escape
from rich.text import Text

from hivemind.agent.audit import parse_record
from hivemind.agent.auditfile import AUDIT_TAIL_BYTES, MAX_RECORD_BYTES, LineReader
from hivemind.agent.record import (
    AnyRecord,
    AuditRecord,
    BudgetNotice,
    CycleRecord,
    CycleStart,
    Interrupted,
    RomFixed,
    RomProblem,
)
from hivemind.agent.report import CycleReport
from hivemind.cli.common import (
    HiveArgument,
    HiveOption,
    JsonOption,
    console,
    err_console,
    fail,
    folder_given,
    resolve_hive,
    shown_path,
)
from hivemind.cli.run_summary import print_summary, summary_json
from hivemind.cli.scratch import scratch_copy
from hivemind.daemon.configwatch import read_hive_toml
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.outcome import BoardBefore, outcome
from hivemind.errors import ConfigError
from hivemind.hive.config import LoadedConfig, load_config
from hivemind.hive.layout import Hive
from hivemind.hive.trust import ignored_line
from hivemind.llm.select import BASE_URL_ENV, credential, make_provider, wants_offline


def _cycle_line(report: CycleReport) -> None:
    u = report.usage
    bits = [f"[bold]{report.agent}[/] #{report.cycle}", f"{report.tool_calls} tool calls"]
    if report.tasks_done:
        bits.append(f"[green]{report.tasks_done} task(s) done[/]")
    if report.messages_sent:
        bits.append(f"{report.messages_sent} message(s) sent")
    if report.tasks_failed:
        bits.append(f"[red]{report.tasks_failed} task(s) failed[/]")
    bits.append(f"{u.total_input + u.output_tokens} tokens")
    if report.error:
        bits.append(f"[red]error: {escape(report.error)}[/]")
    # One line whatever the width (a log file is grepped line by line).
    console.print("  ".join(bits), highlight=False, soft_wrap=True)


def _provider_lines(loaded: LoadedConfig, shown_file: str, folder: str) -> list[str]:
    """What of hive.toml's `[provider]` is not used, and why: not trusted, or the
    environment's endpoint wins (one line each)."""
    lines = [line] if (line := ignored_line(loaded.trust, shown_file, folder)) else []
    file_url = loaded.config.provider.base_url
    if file_url is not None and os.environ.get(BASE_URL_ENV):
        lines.append(f"{shown_file}: [provider] base_url not used: ${BASE_URL_ENV} is set, "
                     "and the environment wins")
    return lines


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
            int | None, typer.Option("--max-cycles", min=1, help="Stop after N think-cycles.")
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
                "--workers", min=1, max=64,
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
        daemon = Daemon(
            hive, config, provider,
            RunOptions(until_idle=until_idle, agents=names, max_cycles=max_cycles, poll=poll,
                       workers=workers),
            secrets=(secret,) if secret else (),
            on_cycle=None if quiet or as_json else _cycle_line,
            hive_toml=hive_toml,
        )
        started, before = time.monotonic(), BoardBefore.of(hive)
        reason = asyncio.run(daemon.run())
        seconds = time.monotonic() - started
        found, code = outcome(hive, before, daemon.runners.values(), reason, until_idle)
        if as_json:
            typer.echo(json.dumps(summary_json(daemon, seconds, reason, found, code)))
        else:
            print_summary(daemon, seconds, reason, found)
        if code:
            raise typer.Exit(code)

    @app.command("log", short_help="An agent's audit trail: cycles, tool calls, tokens.")
    def log(
        agent: Annotated[str, typer.Argument(help="The agent whose audit trail to show.")],
        hive_opt: HiveOption = None,
        follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing.")] = False,
        as_json: JsonOption = False,
        last: Annotated[
            int, typer.Option("--last", "-n", min=0, help="Only the last N records.")
        ] = 50,
    ) -> None:
        """Show an agent's audit trail: each cycle, its context, tool calls, tokens, errors."""
        hive = resolve_hive(hive_opt)
        # An agent since removed still has its trail; a path is no agent's name.
        plain = agent == Path(agent).name and not agent.startswith(".")
        if agent not in hive.agent_names() and not (plain and hive.audit_path(agent).exists()):
            fail(f"no agent {agent!r} in {hive.root} (agents: "
                 f"{', '.join(hive.agent_names()) or 'none'})")
        path = hive.audit_path(agent)
        records, at = _new_records(path, Position(), keep=last, tail=True)
        if not records and not as_json:  # JSON lines: no record, no line
            console.print(Text(f"no audit records for {agent} yet ({hive.relative(path)})"),
                          style="dim", soft_wrap=True)
        for rec in records[max(0, len(records) - last):]:
            _print_record(rec, as_json)
        if follow:
            _follow(path, as_json, at)


def _print_record(rec: AnyRecord, as_json: bool) -> None:
    """One line a record (and one a tool call), the file's text shown as is, never as markup."""
    if as_json:
        console.out(json.dumps(rec.as_json(), ensure_ascii=False, default=str), highlight=False)
        return
    cycle = rec.cycle
    head = Text.assemble((str(rec.at or "")[:19], "dim"),
                         f" #{cycle} " if cycle is not None else " ")
    if isinstance(rec, CycleStart):
        _line(head, "start ", _fields(rec, "tasks", "mail"))
    elif isinstance(rec, CycleRecord):
        _line(head, ("cycle", "bold"),
              f" kept={len(rec.kept)} dropped={len(rec.dropped)}"
              f" tokens={rec.tokens}{_cost_field(rec.cost)}{_ms_field(rec.duration_ms)}")
        for call in rec.tool_calls:
            mark = ("✗", "red") if call.error else ("✓", "green")
            given = json.dumps(call.input, ensure_ascii=False, default=str)
            result = call.result
            _line("     ", mark, f" {call.name or '?'} {given[:100]}",
                  f" → {_one_line(result)[:100]}" if result is not None else "")
        if rec.text:  # what the model said: its answer, even one no tool took
            _line("     ", ("said", "cyan"), f" {_one_line(rec.text)[:300]}")
        if rec.ended:  # the turn's end with no closing model call, and why
            _line("     ", ("ended", "green"), f" {_one_line(rec.ended)[:100]}, "
                  "no closing model call")
        for why in rec.effects.refusals:
            _line("     ", ("refused", "yellow"), f" {_one_line(why)[:200]}")
        if rec.followup:
            _line("     ", ("follow-up", "yellow"), f" {', '.join(rec.followup)}")
        for op in rec.effects.memories:
            text = _memory_op(op)
            if text:
                _line("     ", ("memory", "cyan"), f" {text}")
        if rec.error:
            _line(("     error: " + _one_line(rec.error), "red"))
    elif isinstance(rec, BudgetNotice) and rec.warned is not None:
        what, _, which = rec.warned.partition(":")
        told = (f"task {which} stopped: its token budget is spent" if what == "task"
                else f"paused: its daily token budget for {which} is spent")
        _line(head, ("budget", "yellow"), f" {told} (human was told)")
    elif isinstance(rec, RomProblem):
        _line(head, ("ROM error", "red"), " ", _one_line(rec.error or "?"))
    elif isinstance(rec, RomFixed):
        _line(head, ("ROM fixed", "green"))
    elif isinstance(rec, Interrupted):
        _line(head, ("interrupted", "yellow"), f" {_interrupted(rec)}")
    else:
        rest = {k: v for k, v in rec.as_json().items() if k not in ("event", "at", "cycle")}
        _line(head, (str(rec.event), "yellow"), f" {rest}")


def _interrupted(rec: Interrupted) -> str:
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


def _memory_op(op: dict[str, Any]) -> str | None:
    """One line for a long-term memory operation of a cycle (None: nothing to show)."""
    kind = op.get("op")
    if kind in ("context", "recall"):
        found = [r for r in op.get("results") or [] if isinstance(r, dict)]
        if not found and kind == "context":
            return None  # the common case: nothing recalled for the context
        shown = ", ".join(f"{r.get('id')} ({float(r.get('score') or 0):.2f})" for r in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        what = "in the context" if kind == "context" else "recalled"
        query = _one_line(op.get("query") or "")[:60]
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
    return None


def _fields(rec: AuditRecord, *names: str) -> str:
    """` tasks=['t1'] mail=[]`: the fields the record has (a missing one is left out)."""
    given = rec.as_json()
    return "".join(f" {n}={given[n]}" for n in names if given.get(n) is not None)


def _ms_field(ms: object) -> str:
    """` 7 ms`; nothing when the record has no duration."""
    return f" {ms} ms" if isinstance(ms, (int, float)) else ""


def _cost_field(cost: object) -> str:
    """` cost=$0.0123`; nothing when the cycle has no cost (offline, or no known price)."""
    return f" cost=${cost:.4f}" if isinstance(cost, (int, float)) else ""


def _line(*parts: str | tuple[str, str] | Text) -> None:
    console.print(Text.assemble(*parts), soft_wrap=True)


def _one_line(value: object) -> str:
    return " ".join(str(value).split())


class Position(NamedTuple):
    """Where a reader is in an audit file: which file, the end of the last line read,
    and whether it is inside a line it skips (over-long)."""

    inode: int = -1
    offset: int = 0
    skipping: bool = False


def _new_records(
    path: Path, at: Position, keep: int | None = None, *, tail: bool = False
) -> tuple[list[AnyRecord], Position]:
    """The records written to `path` since `at` (the last `keep` of them), and where they end.

    A last line without its newline is still being written: it is left for the next
    read. A file that shrank or was replaced is read again from its start (`tail`: its
    last `AUDIT_TAIL_BYTES`). A line that is not a JSON object, or is over
    `MAX_RECORD_BYTES`, is skipped; at most `AUDIT_TAIL_BYTES` are read a call.
    """
    records: deque[AnyRecord] = deque(maxlen=keep)
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_ino != at.inode or st.st_size < at.offset:
                reader = LineReader.at_tail(fh, st.st_size) if tail else LineReader()
                if reader.offset:
                    err_console.print(Text(f"{path} is {st.st_size} bytes: only its last "
                                           f"{AUDIT_TAIL_BYTES} are read"), style="dim")
                at = Position(st.st_ino)
            else:
                reader = LineReader(offset=at.offset, skipping=at.skipping)
            end = min(st.st_size, reader.offset + AUDIT_TAIL_BYTES)
            for line in reader.lines(fh, end):
                rec = parse_record(line)
                if rec is not None:
                    records.append(rec)
    except FileNotFoundError:
        return [], at
    if reader.overlong:
        err_console.print(Text(f"{path}: skipped {reader.overlong} line(s) over "
                               f"{MAX_RECORD_BYTES} bytes"), style="yellow")
    return list(records), Position(at.inode, reader.offset, reader.skipping)


def _follow(path: Path, as_json: bool, at: Position) -> None:
    """Print the records written from `at` on as they come, until Ctrl-C."""
    try:
        while True:
            time.sleep(0.5)
            records, at = _new_records(path, at)
            for rec in records:
                _print_record(rec, as_json)
    except KeyboardInterrupt:
        return
