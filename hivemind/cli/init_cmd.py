"""`hivemind init`: create a hive, or add what is missing to one."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape

from hivemind.cli.common import (
    HiveArgument,
    HiveOption,
    console,
    err_console,
    fail,
    folder_given,
    shown_path,
)
from hivemind.hive.locate import enclosing_hive
from hivemind.hive.scaffold import EXAMPLE_AGENT, scaffold


def init_command(
    directory: HiveArgument = None,
    hive: HiveOption = None,
) -> None:
    """Create a hive: folders, a commented hive.toml, an example agent and a README.

    Existing files are never overwritten; running it again only adds what is missing.
    """
    target = folder_given(directory, hive) or Path.cwd()
    if target.exists() and not target.is_dir():
        fail(f"{target}: exists and is not a folder")
    _not_in_a_hives_own_folder(target)
    try:
        report = scaffold(target)
    except OSError as exc:
        fail(f"{target}: cannot create the hive: {exc.strerror}")
    root = report.hive.root
    inside = enclosing_hive(root)
    if inside is not None and report.created:
        err_console.print(f"[yellow]note:[/] {escape(shown_path(root))} is inside the hive "
                          f"{escape(shown_path(inside))}: commands run below it now find this "
                          "one", highlight=False, soft_wrap=True)
    for path in report.created:
        console.print(f"[green]created[/] {path.relative_to(root)}", highlight=False)
    for path in report.skipped:
        console.print(f"[yellow]kept[/]    {path.relative_to(root)} (exists)", highlight=False)
    where = shown_path(root)
    console.print(
        f"\nHive ready in [bold]{'this folder' if where == '.' else where}[/]. Next:\n"
        f'  hivemind task add "Write a haiku about bees" --hive {where}\n'
        f"  hivemind run {where}    (with $ANTHROPIC_API_KEY set; --offline: no model)\n"
        f"  hivemind status {where}\n"
        f"Read {where}/README.md for how tasks, mail and agents/{EXAMPLE_AGENT}/ROM.md work.",
        highlight=False,
    )


HIVE_OWN_FOLDERS = frozenset({"agents", "tasks", "mailboxes", "knowledge", ".hivemind"})
"""Folders of a hive its runtime reads as its own: no hive may be made inside them."""


def _not_in_a_hives_own_folder(target: Path) -> None:
    """Refuse a hive inside another's agents/, tasks/, ...: its files would be read as
    that hive's (its folders as agents); inside workspace/ or elsewhere, only a note."""
    outer = enclosing_hive(target)
    if outer is None:
        return
    first = target.resolve().relative_to(outer).parts[0]
    if first in HIVE_OWN_FOLDERS:
        fail(f"{target}: inside {first}/ of the hive {shown_path(outer)}, whose runtime "
             "would read the new hive's files as its own; create it elsewhere (or use that "
             f"hive: --hive {shown_path(outer)})")
