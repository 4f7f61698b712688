"""The `hivemind` command: one typer app; each command group lives in its own module."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from hivemind.errors import HivemindError, UserError

# `hivemind --help` lists the commands in the order a newcomer uses them.
ORDER = ("init", "task", "send", "run", "status", "top", "inbox", "pause", "resume",
         "inspect", "log", "memory", "agents", "trust")


class _InOrder(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:  # click.Context (typer may vendor click)
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))


app = typer.Typer(
    name="hivemind",
    cls=_InOrder,
    help=(
        "Run a team of LLM agents whose shared memory is a folder: drop task files "
        "into tasks/, write to mailboxes/, edit agents/<name>/ROM.md."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(wanted: bool) -> None:
    if not wanted:
        return
    try:
        typer.echo(f"hivemind {version('hivemind')}")
    except PackageNotFoundError:  # run from a source tree that was never installed
        typer.echo("hivemind (version unknown: the package is not installed)")
    raise typer.Exit()


@app.callback()
def _options(
    _version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True,
                     callback=_print_version),
    ] = False,
) -> None:
    # No docstring: the app's help above stays the one `hivemind --help` shows.
    pass


# Each module adds its commands to `app` when imported (one module per group).
from hivemind.cli import (  # noqa: E402
    agents_cmd,
    hive_cmds,
    inbox_cmd,
    inspect_cmd,
    log_cmd,
    memory_cmd,
    run_cmd,
    steer_cmd,
    task_cmds,
    trust_cmd,
)
from hivemind.cli.top import command as top_cmd  # noqa: E402

hive_cmds.register(app)
task_cmds.register(hive_cmds.task_app)
run_cmd.register(app)
inbox_cmd.register(app)
log_cmd.register(app)
inspect_cmd.register(app)
memory_cmd.register(app)
trust_cmd.register(app)
agents_cmd.register(app)
steer_cmd.register(app)
top_cmd.register(app)


def main() -> None:
    """Entry point: user mistakes print one line, never a traceback."""
    from rich.markup import escape

    from hivemind.cli.common import err_console

    try:
        app()
    except UserError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False,
                          soft_wrap=True)
        raise SystemExit(1) from None
    except HivemindError as exc:
        err_console.print(f"[bold red]failed:[/] {escape(str(exc))}", highlight=False,
                          soft_wrap=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
