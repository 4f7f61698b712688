"""`hivemind inspect AGENT`: the context an agent would get now, and why blocks are left out."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from rich.box import SIMPLE_HEAD
from rich.markup import escape
from rich.table import Table

from hivemind.cli.common import (
    HiveOption,
    JsonOption,
    console,
    err_console,
    fail,
    resolve_hive,
)
from hivemind.errors import ConfigError, CriticalOverBudgetError, UnknownAgentError


def _print_report(report: dict[str, Any]) -> None:
    table = Table(title=f"context of {report['agent']}", title_justify="left", box=SIMPLE_HEAD)
    table.add_column("id", overflow="fold", ratio=3)
    table.add_column("type", no_wrap=True)
    table.add_column("priority", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("est.", justify="right", no_wrap=True)
    table.add_column("kept", no_wrap=True)
    table.add_column("reason", overflow="fold", ratio=4)
    for row in report["blocks"]:
        kept = "[green]kept[/]" if row["kept"] else "[red]dropped[/]"
        estimated = "-" if row["estimated"] is None else f"{row['estimated']:,}"
        named = escape(row["id"]) + (f"\n[dim]{escape(row['file'])}[/]" if row.get("file") else "")
        table.add_row(named, row["type"], row["priority"], f"{row['tokens']:,}",
                      estimated, kept, escape(row["reason"]))
    console.print(table)
    for line in _summary(report):
        console.print(line, highlight=False, markup=False)
    if report["pending_tasks_shown"]:
        console.print(f"{report['pending_tasks_shown']} pending task(s) shown as this agent "
                      "would get them at its next cycle", highlight=False)
    left_out = report.get("notes_left_out") or []
    if left_out:
        console.print(f"[bold]knowledge notes left out by the filter[/] ({len(left_out)}; "
                      "the model finds them with search_files)", highlight=False)
        for note in left_out[:NOTES_SHOWN]:
            console.print(f"  {escape(note['id'])}: {escape(note['reason'])}",
                          highlight=False, soft_wrap=True)
        if len(left_out) > NOTES_SHOWN:
            console.print(f"  … and {len(left_out) - NOTES_SHOWN} more (--json lists all)",
                          highlight=False)
    if report["config_error"]:
        console.print(f"[red]ROM error (last good config used):[/] "
                      f"{escape(report['config_error'])}", highlight=False)
    for problem in report["problems"]:
        console.print(f"[yellow]agents/{escape(report['agent'])}/ROM.md:[/] {escape(problem)}",
                      highlight=False, soft_wrap=True)


NOTES_SHOWN = 20


def _print_request(req: dict[str, Any]) -> None:
    """The request as sent: the system prompt and the JSON context verbatim, tool names."""
    temperature = "" if req["temperature"] is None else f", temperature {req['temperature']}"
    console.rule(f"request of {req['agent']}: model {req['model']}, max_tokens "
                 f"{req['max_output_tokens']:,}{temperature}", align="left", style="bold")
    console.rule("system", align="left", style="dim")
    console.print(req["system"], markup=False, highlight=False, soft_wrap=True)
    console.rule(f"tools ({len(req['tools'])})", align="left", style="dim")
    console.print(", ".join(req["tools"]) or "(none)", markup=False, highlight=False,
                  soft_wrap=True)
    if req.get("mcp_servers"):
        console.print(f"(and the tools of its MCP servers {', '.join(req['mcp_servers'])}, "
                      "which the running daemon adds once they are trusted and ready: "
                      "see `hivemind status`)", markup=False, highlight=False, soft_wrap=True)
    console.rule(f"context ({req['context_tokens']:,} tokens; cached: the first "
                 f"{req['context_stable_chars']:,} characters)", align="left", style="dim")
    console.print(req["context"], markup=False, highlight=False, soft_wrap=True)
    if req["pending_tasks_shown"]:
        console.print(f"({req['pending_tasks_shown']} pending task(s) shown as this agent "
                      "would get them at its next cycle)", highlight=False)
    # On stderr: stdout stays the request as sent, to diff or to pipe.
    if req["config_error"]:
        err_console.print(f"ROM error (last good config used): {req['config_error']}",
                          markup=False, highlight=False, soft_wrap=True)
    for problem in req["problems"]:
        err_console.print(f"agents/{req['agent']}/ROM.md: {problem}", markup=False,
                          highlight=False, soft_wrap=True)


def _summary(report: dict[str, Any]) -> list[str]:
    """The totals, each saying what it counts: the model's tokens or the selector's guess."""
    used, budget = report["used"], report["budget"]
    in_blocks = sum(report["tokens_by_type"].values())
    per_type = ", ".join(f"{k} {v:,}" for k, v in report["tokens_by_type"].items()) or "nothing"
    return [
        f"tokens per type (counted, kept blocks): {per_type}",
        f"used {used:,} of a budget of {budget:,} tokens ({100 * used / budget:.1f} %): "
        f"{in_blocks:,} in the kept blocks and {report['json_array_tokens']:,} for the JSON "
        "array around them, counted",
        _budget_line(budget, report["budget_parts"]),
        "tokens: counted as the model gets each entry (a dropped block's: as it would); "
        "est.: the selector's estimate before reading, which it keeps and drops by and its "
        f"'over budget at' reasons count in ({report['estimated_used']:,} for the kept blocks)",
    ]


def _budget_line(budget: int, parts: dict[str, int]) -> str:
    if "given" in parts:
        return f"budget: {budget:,} tokens, from --budget"
    left = (parts["max_context_tokens"] - parts["output_reserve"]
            - parts["preamble_and_tools"] - parts["team"])  # fmt: skip
    floor = "" if left == budget else f" would leave {left:,}: raised to {budget:,}"
    return (f"budget: max_context_tokens {parts['max_context_tokens']:,} less "
            f"{parts['output_reserve']:,} kept for the reply, "
            f"{parts['preamble_and_tools']:,} for the preamble and the tool definitions and "
            f"{parts['team']:,} for the team list{floor}")  # fmt: skip


def register(app: typer.Typer) -> None:
    """Add `inspect` to the `hivemind` app."""

    @app.command(
        "inspect",
        short_help="The context an agent would get now, what is kept and why.",
        epilog="Examples: hivemind inspect lead --budget 20000   (--json for scripts);  "
        "hivemind inspect lead --request   (the request itself)",
    )
    def inspect(
        agent: Annotated[str, typer.Argument(help="The agent: a folder of agents/ with a ROM.md.")],
        hive: HiveOption = None,
        budget: Annotated[
            int | None,
            typer.Option("--budget", min=1, metavar="TOKENS",
                         help="Token budget for the context (default: "
                         "the ROM's max_context_tokens less the output reserve, the system "
                         "prompt with its team list and the tool definitions; at least "
                         "1,000).", show_default=False),
        ] = None,
        request: Annotated[
            bool,
            typer.Option("--request", help="Print the request the agent would send now "
                         "instead: the model, the system prompt, the tool names and the JSON "
                         "context, verbatim (--json: with the tools' definitions)."),
        ] = False,
        as_json: JsonOption = False,
    ) -> None:
        """Show the context AGENT would get if it thought now: its ROM, knowledge, tasks,
        mail, files and history, which blocks are kept or dropped and why (a kept one: its
        tier, score and the budget used), the knowledge notes its filter left out, and the
        tokens per type. Nothing is changed on disk and no model is called."""
        from hivemind.agent.inspect import inspect_agent, request_of  # heavy: only when run

        where = resolve_hive(hive)
        try:
            if request:
                sent = asyncio.run(request_of(where, agent, budget))
                if as_json:
                    typer.echo(json.dumps(sent, ensure_ascii=False, indent=2))
                else:
                    _print_request(sent)
                return
            report = asyncio.run(inspect_agent(where, agent, budget))
        except (UnknownAgentError, ConfigError) as exc:
            fail(str(exc))
        except CriticalOverBudgetError as exc:  # a runtime failure, as `hivemind run` exits
            fail(str(exc), code=2)
        if as_json:
            typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        else:
            _print_report(report)
