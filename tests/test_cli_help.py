"""Every command's --help, as a newcomer reads it: plain text, wrapped, and honest
about which options take a value."""

from __future__ import annotations

import re
from importlib.metadata import version
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from hivemind.cli.app import app


def _subcommands(command: Any) -> dict[str, Any]:
    """A group's commands by name; none for a command. (Typer may bring its own copy
    of click, so this asks the object rather than checking for click's classes.)"""
    commands = getattr(command, "commands", None)
    return dict(commands) if isinstance(commands, dict) else {}


def _commands() -> list[list[str]]:
    """The path of every command and group: [], ["run"], ["task", "add"], ..."""
    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        for name, sub in _subcommands(command).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


COMMANDS = _commands()


def _help(path: list[str]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_tree_has_every_command() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"init", "task add", "send", "status", "run", "log", "inspect", "memory search"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "hivemind")
def test_help_is_plain_wrapped_text(path: list[str]) -> None:
    text = _help(path)
    assert text.startswith("Usage: hivemind")
    # A flag takes no value: no `<bool>` after it (typer's rich help shows one).
    assert "<bool>" not in text
    assert "╭" not in text and "│" not in text  # no boxes: readable when piped or copied
    assert max(len(line) for line in text.splitlines()) <= 80
    # Help is plain text: a rich escape (`\[daemon]`) would be shown as typed.
    assert "\\[" not in text


def _command(path: list[str]) -> Any:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = _subcommands(command)[name]
    return command


GROUPS = [p for p in COMMANDS if _subcommands(_command(p))]


@pytest.mark.parametrize("path", GROUPS, ids=lambda p: " ".join(p) or "hivemind")
def test_a_group_lists_its_commands_in_full(path: list[str]) -> None:
    listed = _help(path).split("Commands:\n", 1)[1].splitlines()
    for name in _subcommands(_command(path)):
        line = next(line for line in listed if line.split()[:1] == [name])
        # Each summary is whole, not cut to fit the column with "...".
        assert not line.rstrip().endswith("..."), line
        assert re.search(rf"^\s+{re.escape(name)}\s+\S", line)


def test_the_commands_are_listed_in_the_order_a_newcomer_uses_them() -> None:
    lines = _help([]).split("Commands:\n", 1)[1].splitlines()
    names = [line.split()[0] for line in lines if line.startswith("  ") and line.split()]
    assert names == ["init", "task", "send", "run", "status", "top", "inbox", "pause", "resume",
                     "inspect", "log", "memory", "agents", "trust"]


def test_version_prints_the_installed_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"hivemind {version('hivemind')}\n"
    assert re.fullmatch(r"hivemind \d+\.\d+\.\d+\S*\n", result.output)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "hivemind")
def test_an_option_says_what_it_takes_in_a_word_not_a_python_type(path: list[str]) -> None:
    text = _help(path)
    # typer's defaults read `--max-cycles <int range>`, `--hive <path>`, `--id <str>`.
    assert not re.findall(r"-[\w-]+ <[^>]+>", text), re.findall(r"-[\w-]+ <[^>]+>", text)
    if "--hive" in text:
        assert "--hive DIR" in text  # as the README writes it
