"""What every command shares: the `--hive` option, consoles, one-line errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from hivemind.hive.layout import Hive
from hivemind.hive.locate import enclosing_hive, find_hive, is_hive, looks_like_hive

console = Console()
err_console = Console(stderr=True)

HiveOption = Annotated[
    Path | None,
    typer.Option(
        "--hive",
        metavar="DIR",
        help="The hive folder (default: $HIVEMIND_HIVE, else the hive the current folder "
        "is in).",
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
    """The first given folder, else $HIVEMIND_HIVE, else the hive the current folder is
    in (looked for upward, as git does)."""
    chosen = next((c for c in candidates if c is not None), None)
    if chosen is None:
        env = os.environ.get("HIVEMIND_HIVE")
        if not env:
            return _found_hive(must_exist)
        chosen = Path(env)
    if must_exist and not chosen.is_dir():
        fail(f"{chosen}: no such hive folder ({_init_hint(chosen)})")
    hive = Hive(chosen)
    if must_exist and not is_hive(hive.root) and (
        not looks_like_hive(hive.root) or enclosing_hive(hive.root) is not None
    ):
        # Not made into one by mistake (`hivemind run` in the wrong folder), nor a
        # folder of another hive taken for one (an agent's workspace/x/tasks/).
        what = ("no hive.toml, and not both agents/ and tasks/" if looks_like_hive(hive.root)
                else "no tasks/, agents/ or hive.toml")
        fail(f"{hive.root}: not a hive ({what}); {_init_hint(hive.root)}")
    return hive


def _found_hive(must_exist: bool) -> Hive:
    """The hive the current folder is in; the current folder itself if it looks like one
    (or none is needed); else one line saying none was found."""
    here = Path.cwd()
    found = find_hive(here)
    if found is not None:
        return Hive(found)
    if not must_exist or looks_like_hive(here):
        return Hive(here)
    fail(f"{here}: not in a hive (no hive.toml, or agents/ and tasks/, here or in a folder "
         "above); give one with --hive DIR or $HIVEMIND_HIVE, or create one with "
         "`hivemind init .`")  # fmt: skip


def _init_hint(folder: Path) -> str:
    """What to do about a folder that is no hive: never make one inside another hive."""
    inside = enclosing_hive(folder)
    if inside is not None:
        return f"it is inside the hive {shown_path(inside)}: give --hive {shown_path(inside)}"
    return f"create one with `hivemind init {shown_path(folder)}`"


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


def counted(n: int, thing: str, done: str = "") -> str:
    """`1 tool call`, `3 tool calls`, `1 task done`: a count and its noun, agreeing."""
    return f"{n} {thing}{'' if n == 1 else 's'}" + (f" {done}" if done else "")
