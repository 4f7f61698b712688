"""Agents' ROM.md files with last-good semantics: an invalid edit never stops an agent.

Each ROM is re-read only when its file changed (inode, size, mtime); a bad edit
keeps the previous valid config and records the error for `hivemind status`. The
daemon keeps the last valid text in `.hivemind/roms/`, so a restart (or another
command) finds it too.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from hivemind.errors import ConfigError, FileFormatError, UnknownAgentError
from hivemind.hive.atomic import atomic_write
from hivemind.hive.frontmatter import parse, read_text, rom_from_document
from hivemind.hive.layout import Hive
from hivemind.hive.models import AgentConfig, AgentSettings
from hivemind.hive.statcache import RACY_MARGIN, Sig, sig_of

logger = logging.getLogger(__name__)


@dataclass
class _Entry:
    sig: Sig | None = None
    read_at: float = 0.0
    good: AgentConfig | None = None
    text: str = ""  # the file as it was when `good` was read
    error: str | None = None


class RomRegistry:
    """Loads agents' configs from agents/<name>/ROM.md over hive-wide `defaults`.

    With `settle_time`, a ROM changed that recently is being saved: the last good
    config stays until the file has settled, so a half-written file is never used.
    """

    def __init__(self, hive: Hive, defaults: AgentSettings, settle_time: float = 0.0) -> None:
        self.hive = hive
        self.defaults = defaults
        self.settle_time = settle_time
        self.saves_last_good = False
        """Keep each valid ROM read in .hivemind/roms/ (the daemon does; a command that
        only looks, such as `status` or `inspect`, changes nothing on disk)."""
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
                text = read_text(path)
                config = rom_from_document(parse(text, path), name, self.defaults)
                if entry.good is not None and sig_of(os.stat(path)) != sig:
                    entry.sig = None  # it changed while we read it: look again next time
                    return entry.good
                entry.good, entry.text, entry.error = config, text, None
                if self.saves_last_good:
                    self._keep(name, text)
            except FileFormatError as exc:
                error = f"{self.hive.relative(path)}: {exc.reason}"
                if entry.good is None:
                    self._last_good(name, entry)
                if error != entry.error:
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

    def _keep(self, name: str, text: str) -> None:
        """Save `text`, the agent's valid ROM, as its last good one (unless it is)."""
        saved = self.hive.last_good_rom_path(name)
        try:
            if saved.read_text(encoding="utf-8") == text:
                return
        except (OSError, UnicodeDecodeError):
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
        try:
            text = read_text(saved)
            entry.good = rom_from_document(parse(text, saved), name, self.defaults)
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
