"""Agents' ROM.md files with last-good semantics: an invalid edit never stops an agent.

Each ROM is re-read only when its file changed (inode, size, mtime); a bad edit
keeps the previous valid config and records the error for `hivemind status`. The
daemon keeps the last valid text in `.hivemind/roms/`, so a restart (or another
command) finds it too. A valid ROM that will not do what it says (no room for a
context, globs that match no file) runs, with warnings (`warnings`, and the log).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from hivemind.errors import ConfigError, FileFormatError, UnknownAgentError
from hivemind.fs.atomic import atomic_write
from hivemind.fs.globs import glob_match, glob_root
from hivemind.fs.regular import read_regular
from hivemind.fs.statcache import RACY_MARGIN, Sig, sig_of
from hivemind.hive import mcptrust
from hivemind.hive.document import decode_text
from hivemind.hive.frontmatter import parse, rom_and_warnings
from hivemind.hive.layout import RUNTIME_FOLDERS, Hive, hive_files
from hivemind.settings import (
    DEFAULT_MODEL_ALIASES,
    MIN_CONTEXT_TOKENS,
    AgentConfig,
    AgentSettings,
    resolve_model,
)

logger = logging.getLogger(__name__)


@dataclass
class _Entry:
    sig: Sig | None = None
    read_at: float = 0.0
    good: AgentConfig | None = None
    text: str = ""  # the file as it was when `good` was read
    error: str | None = None
    warnings: list[str] = field(default_factory=list)  # of `good`, which still runs
    told: list[str] = field(default_factory=list)  # what `good`'s front matter runs without
    own_model: bool = True  # `good`'s front matter names its model (else: hive.toml's)


class RomRegistry:
    """Loads agents' configs from agents/<name>/ROM.md over hive-wide `defaults`.

    With `settle_time`, a ROM changed that recently is being saved: the last good
    config stays until the file has settled, so a half-written file is never used.
    """

    def __init__(self, hive: Hive, defaults: AgentSettings, settle_time: float = 0.0,
                 models: Mapping[str, str] = DEFAULT_MODEL_ALIASES) -> None:
        self.hive = hive
        self.defaults = defaults
        self.models = models
        """hive.toml's `[models]`: `model: sonnet` runs, is priced and shown as its id."""
        self.settle_time = settle_time
        self.saves_last_good = False
        """Keep each valid ROM read in .hivemind/roms/ (the daemon does; a command that
        only looks, such as `status` or `inspect`, changes nothing on disk)."""
        self.tells_problems = True
        """Log a ROM's new problem (a daemon's worker process leaves it to the lead, which
        reads every ROM too: one warning, not one per process)."""
        self.fixed_tokens: Callable[[AgentConfig], int] | None = None
        """Tokens each request carries besides the context (preamble, tool definitions),
        for the warning that a ROM leaves no room for a context; unknown: 0."""
        self.model_problem: Callable[[str], str | None] | None = None
        """Why a model id is none (not in the provider's list, say), once that is known."""
        self.trusted_as = hive
        """The hive whose trust decides if a ROM's MCP servers may start (a scratch
        copy's is the hive it copies)."""
        self.environ: Mapping[str, str] = os.environ
        self._entries: dict[str, _Entry] = {}

    def load(self, name: str) -> AgentConfig:
        """The agent's config; the last good one if the ROM is now invalid.

        Raises UnknownAgentError if there is no ROM.md, ConfigError if it has never
        been valid.
        """
        path = self.hive.rom_path(name)
        entry = self._entries.setdefault(name, _Entry())
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            self._entries.pop(name, None)
            raise UnknownAgentError(
                f"no agent named {name!r}: {self.hive.relative(path)} does not exist"
            ) from None
        sig = sig_of(st)
        if sig != entry.sig or entry.read_at - st.st_mtime < RACY_MARGIN:
            if entry.good is not None and time.time() - st.st_mtime < self.settle_time:
                return entry.good  # being saved: look again once it has settled
            entry.sig, entry.read_at = sig, time.time()
            try:
                # A regular file of at most 256 KB in the hive: no FIFO, device, link out.
                text = decode_text(path, read_regular(path, self.hive.root))
                config, told, own_model = self._read(text, path, name)
                if entry.good is not None and sig_of(os.stat(path)) != sig:
                    entry.sig = None  # it changed while we read it: look again next time
                    return entry.good
                entry.good, entry.text, entry.error = config, text, None
                entry.own_model = own_model
                self._warn(name, entry, config, told)
                if self.saves_last_good:
                    self._keep(name, text)
            except FileFormatError as exc:
                # Named as in the hive: a link out must not show as the file it points to.
                error = f"{path.relative_to(self.hive.root).as_posix()}: {exc.reason}"
                if entry.good is None:
                    self._last_good(name, entry)
                if error != entry.error and self.tells_problems:
                    kept = "keeping the last good config" if entry.good else "no valid config yet"
                    logger.warning("%s (%s)", error, kept)
                entry.error = error
            except OSError as exc:
                entry.error = f"{self.hive.relative(path)}: cannot read: {exc.strerror}"
                if entry.good is None:
                    self._last_good(name, entry)
        if entry.good is None:
            raise ConfigError(entry.error or f"{self.hive.relative(path)}: not loaded")
        return entry.good

    def _read(self, text: str, path: Path, name: str) -> tuple[AgentConfig, list[str], bool]:
        """The config of ROM text `text` over the defaults, its model alias resolved, what
        its front matter has that the agent runs without, and whether it names a model."""
        doc = parse(text, path)
        config, told = rom_and_warnings(doc, name, self.defaults)
        model = resolve_model(config.model, self.models)
        if model != config.model:
            config = config.model_copy(update={"model": model})
        return config, told, doc.front.get("model") not in (None, "inherit")

    def _warn(self, name: str, entry: _Entry, config: AgentConfig, told: list[str]) -> None:
        """Note what in a valid ROM does not do what it says (`told`: what its front
        matter has that the agent runs without); log each new one once."""
        # Counting the tools loads the tokenizer (half a second for `hivemind status`):
        # only where they could make the difference.
        room = config.max_context_tokens - config.max_output_tokens
        fixed = (self.fixed_tokens(config) if self.fixed_tokens is not None
                 and room < MIN_CONTEXT_TOKENS + FIXED_TOKENS_MOST else 0)
        warnings = told + config.budget_warnings(fixed) + glob_warnings(self.hive, config)
        warnings += mcptrust.warnings(self.trusted_as, name, config.mcp, self.environ,
                                      config.tools, root=self.hive.root)
        if self.model_problem is not None and (problem := self.model_problem(config.model)):
            # Not this ROM's to fix: the line would send the person to the wrong file.
            warnings.append(problem if entry.own_model else
                            f"{problem} (it is hive.toml's [agents] model: this ROM names none)")
        if self.tells_problems:
            shown = self.hive.relative(self.hive.rom_path(name))
            for warning in warnings:
                if warning not in entry.warnings:
                    logger.warning("%s: %s", shown, warning)
        entry.warnings, entry.told = warnings, told

    def check_again(self) -> None:
        """Warn again about the configs read (`model_problem` set since): new ones logged."""
        for name, entry in list(self._entries.items()):
            if entry.good is not None:
                self._warn(name, entry, entry.good, entry.told)

    def warnings(self, name: str) -> list[str]:
        """What in the agent's current config is valid but likely not meant (it runs
        anyway): token settings that cannot hold, globs that match nothing."""
        entry = self._entries.get(name)
        return list(entry.warnings) if entry is not None and entry.good is not None else []

    def _keep(self, name: str, text: str) -> None:
        """Save `text`, the agent's valid ROM, as its last good one (unless it is)."""
        saved = self.hive.last_good_rom_path(name)
        try:  # a FIFO there must not hang the daemon (it is replaced below)
            if read_regular(saved, self.hive.root) == text.encode("utf-8"):
                return
        except (OSError, FileFormatError):
            pass
        try:
            saved.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(saved, text, fsync=False)
        except OSError as exc:  # a read-only hive, say: the agent still runs on this one
            logger.debug("%s: last good ROM not saved: %s", saved, exc)

    def _last_good(self, name: str, entry: _Entry) -> None:
        """Take up the agent's last good ROM saved by an earlier read (another run's, or
        another command's), if there is one and it is still valid."""
        saved = self.hive.last_good_rom_path(name)
        try:  # read as ROM.md is: a cloned .hivemind/ may hold a link out or a FIFO
            text = decode_text(saved, read_regular(saved, self.hive.root))
            entry.good = self._read(text, saved, name)[0]
            entry.text = text
        except (OSError, FileFormatError):
            return

    def text(self, name: str) -> str | None:
        """The ROM.md text the current config was read from (None before a good read)."""
        entry = self._entries.get(name)
        return entry.text if entry is not None and entry.good is not None else None

    def error(self, name: str) -> str | None:
        """The problem of the agent's current ROM.md, or None if it is valid."""
        entry = self._entries.get(name)
        return entry.error if entry else None

    def agents(self) -> list[str]:
        """Names of the agents (folders of agents/ with a ROM.md)."""
        return self.hive.agent_names()

    def configs(self) -> dict[str, AgentConfig]:
        """Every agent with a valid (or last good) config."""
        out = {}
        for name in self.agents():
            try:
                out[name] = self.load(name)
            except (ConfigError, UnknownAgentError):
                continue
        return out


_KNOWLEDGE = "knowledge/"
FIXED_TOKENS_MOST = 10_000
"""More than the preamble and every tool's definition take (about 2,200 tokens)."""
GLOB_CHECK_FILES = 20_000
"""Files looked at, at most, to tell that a `watch` glob matches none: the check runs as
a ROM is loaded, on the daemon's loop, and a huge workspace must not stall it (past
that many, no warning: it cannot be told cheaply)."""


def glob_warnings(hive: Hive, config: AgentConfig) -> list[str]:
    """The ROM's `knowledge` and `watch` globs that match no file now (a typo, most
    likely: the agent silently gets nothing from them)."""
    out = []
    if config.knowledge:
        notes = [rel.removeprefix(_KNOWLEDGE) for rel in _files(hive.knowledge_dir, "knowledge")
                 if rel.endswith(".md")]
        for glob in config.knowledge:
            pattern = glob.strip().removeprefix("./").removeprefix(_KNOWLEDGE)
            if not any(glob_match(pattern, rel) for rel in notes):
                out.append(f"knowledge: {glob!r} matches no note under knowledge/ (so the "
                           "agent gets none from it)")
    for glob in config.watch:
        base = glob_root(glob)
        if base.split("/", 1)[0] in RUNTIME_FOLDERS:
            out.append(f"watch: {glob!r} is under {base.split('/', 1)[0]}/, which watch "
                       "never shows (mail and tasks reach the agent by themselves)")
        elif _matches(glob, islice(_files(hive.root / base, base), GLOB_CHECK_FILES)) is False:
            out.append(f"watch: {glob!r} matches no file of the hive (yet)")
    return out


def _matches(glob: str, paths: Iterable[str]) -> bool | None:
    """Whether `glob` matches one of `paths`; None if none did but they were cut short
    (GLOB_CHECK_FILES of them): the answer is not known."""
    n = 0
    for rel in paths:
        n += 1
        if glob_match(glob, rel):
            return True
    return None if n >= GLOB_CHECK_FILES else False


def _files(folder: Path, prefix: str) -> Iterator[str]:
    """Hive-relative paths of the files below `folder` (`prefix` = its own), as
    perceive finds them: no temp names, no runtime state, links not followed."""
    return (rel for rel, path in hive_files(folder, prefix) if not os.path.islink(path))
