"""Agent files from elsewhere (Claude Code's `.claude/agents/*.md`) made the hive's agents.

Each file becomes agents/<name>/ROM.md as it is, byte for byte: `name:` names the agent
(else the file's stem). A file that is not a valid ROM, or whose agent already has a
ROM, is left where it is, with the reason: nothing is overwritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.fs.atomic import create_new
from hivemind.hive.document import parse, read_text
from hivemind.hive.frontmatter import rom_and_warnings
from hivemind.hive.layout import HUMAN, Hive, is_temp_name
from hivemind.settings import AgentSettings

_AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass
class Imported:
    """One file: where it went (None: left out, `reason` says why) and its warnings."""

    source: Path
    name: str
    rom: str | None = None
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    kept: bool = False  # left out because the agent has a ROM already: nothing to fix
    skipped: bool = False  # no agent file at all (a README beside them): nothing to fix


def agent_files(folder: Path) -> list[Path]:
    """The agent files of `folder` (its *.md, sorted; a file is taken as the only one);
    a Claude Code project's own, in .claude/agents/, if it has none."""
    if folder.is_file():
        return [folder]
    found = sorted(p for p in folder.glob("*.md") if not is_temp_name(p.name))
    project = folder / ".claude" / "agents"
    return found if found or not project.is_dir() else agent_files(project)


def _agent_name(text: str, source: Path) -> str:
    """The agent's name: the file's `name:` if it is one a folder may have, else its stem."""
    try:
        given = parse(text, source).front.get("name")
    except FileFormatError:
        given = None
    return str(given).strip() if isinstance(given, str) and _AGENT_NAME.match(
        given.strip()) else source.stem


def import_agent(hive: Hive, source: Path, defaults: AgentSettings) -> Imported:
    """Copy `source` to agents/<name>/ROM.md unless that exists or `source` is no valid ROM."""
    try:
        text = read_text(source)
    except (OSError, FileFormatError) as exc:
        why = exc.problem if isinstance(exc, FileFormatError) else exc.strerror
        return Imported(source, source.stem, reason=f"not read: {why}")
    if not text.lstrip("\ufeff").startswith("---"):  # a README beside the agent files
        return Imported(source, source.stem, skipped=True, reason="not an agent file: no "
                        "front matter (an agent file starts with ---, name: and description:)")
    name = _agent_name(text, source)
    if name == HUMAN or not _AGENT_NAME.match(name):
        return Imported(source, name, reason=f"{name!r} cannot name an agent (its folder): "
                        "give the file a `name:` of letters, digits, - and _")
    rom = f"agents/{name}/ROM.md"
    try:  # validated as the agent's: its warnings are those `status` will show
        _, warnings = rom_and_warnings(parse(text, source), name, defaults)
    except FileFormatError as exc:
        return Imported(source, name, reason=f"not a valid ROM: {exc.reason}")
    path = hive.rom_path(name)
    if path.exists() or path.is_symlink():
        return Imported(source, name, reason=f"{rom} exists (left as it is)", kept=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not create_new(path, text):
            return Imported(source, name, reason=f"{rom} exists (left as it is)", kept=True)
    except OSError as exc:
        return Imported(source, name, reason=f"{rom} not written: {exc.strerror}")
    return Imported(source, name, rom=rom, warnings=warnings)
