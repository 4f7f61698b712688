"""What every command shares: the `--hive` option, consoles, one-line errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from hivemind.hive.layout import Hive

console = Console()
err_console = Console(stderr=True)

HiveOption = Annotated[
    Path | None,
    typer.Option(
        "--hive",
        help="The hive folder (default: $HIVEMIND_HIVE, else the current directory).",
        show_default=False,
    ),
]
HiveArgument = Annotated[
    Path | None,
    typer.Argument(
        help="The hive folder (same as --hive).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def resolve_hive(*candidates: Path | None, must_exist: bool = True) -> Hive:
    """The first given folder, else $HIVEMIND_HIVE, else the current directory."""
    chosen = next((c for c in candidates if c is not None), None)
    if chosen is None:
        env = os.environ.get("HIVEMIND_HIVE")
        chosen = Path(env) if env else Path.cwd()
    if must_exist and not chosen.is_dir():
        fail(f"{chosen}: no such hive folder "
             f"(create one with `hivemind init {shown_path(chosen)}`)")
    hive = Hive(chosen)
    if must_exist and not (
        hive.tasks_dir.is_dir() or hive.agents_dir.is_dir() or hive.config_file.is_file()
    ):
        # Not made into one by mistake (`hivemind run` in the wrong folder).
        fail(f"{hive.root}: not a hive (no tasks/, agents/ or hive.toml); create one with "
             f"`hivemind init {shown_path(hive.root)}`")  # fmt: skip
    return hive


def folder_given(directory: Path | None, option: Path | None) -> Path | None:
    """The hive folder given as the DIR argument or as --hive; both, naming two, is refused."""
    if directory is not None and option is not None and directory.resolve() != option.resolve():
        fail(f"two hive folders given: {shown_path(directory)} and --hive {shown_path(option)}; "
             "give one")  # fmt: skip
    return directory if directory is not None else option


def shown_path(path: Path) -> str:
    """`path` as a user would type it here: relative to the current folder if inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one red line on stderr and exit; never a traceback for a user mistake."""
    # The message names files and values as typed: shown as is, never read as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)
