"""What `hivemind top` shows, gathered from the hive's files alone.

`HiveReader.snapshot()` reads status.json, the task folders, the pauses and the
audit logs' ends into a `TopSnapshot`: no lock is taken and nothing is written, so
it works beside a daemon started elsewhere (or none) and never slows it down. The
widgets (`top.app`) only draw snapshots; tests and `bench/bench_top.py` use this
module without a terminal.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hivemind.cli.hive_status import daemon_status
from hivemind.cli.mcp_status import servers_brief
from hivemind.cli.top.audit_tail import AuditTail
from hivemind.cli.top.feed import FeedEvent, events_of
from hivemind.cli.top.taskfolders import FolderCache, TaskLine, task_lines
from hivemind.errors import ConfigError, UserError
from hivemind.fs.filenames import shown
from hivemind.hive.config import load_config
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.rom import RomRegistry
from hivemind.hive.steering import PauseRecord, paused_agents
from hivemind.settings import AgentSettings

FEED_KEPT = 300
DISABLED = "enabled: false in its ROM"


@dataclass(frozen=True)
class DaemonLine:
    """Whether a daemon runs on the hive, and the one line that says so."""

    running: bool
    text: str


@dataclass(frozen=True)
class AgentRow:
    name: str
    state: str  # idle, thinking, waiting, paused, error, stopped
    detail: str  # why (paused by whom, the error, the wait) or ""
    tasks: tuple[str, ...]  # the ids of the tasks it holds
    unread: int  # messages waiting in its mailbox's new/
    said: str  # the last line the model wrote
    tokens_today: int
    cost_today: float | None  # None: no price known for a cycle of today


@dataclass(frozen=True)
class TopSnapshot:
    root: str
    daemon: DaemonLine
    agents: tuple[AgentRow, ...]
    counts: dict[str, int]
    tasks: tuple[TaskLine, ...]  # the newest of each state, in `STATES` order
    feed: tuple[FeedEvent, ...]  # oldest first
    taken_at: datetime = field(default_factory=lambda: datetime.now(UTC))


class HiveReader:
    """Reads snapshots of one hive; keeps the audit logs' ends between them."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self.tails: dict[str, AuditTail] = {}
        self.feed: list[FeedEvent] = []
        self._roms: dict[str, tuple[int, int] | None] = {}
        self._registry: RomRegistry | None = None
        self.folders = FolderCache()
        self._noted: list[FeedEvent] = []
        self._noting = threading.Lock()
        self._pauses: dict[str, PauseRecord] | None = None  # at the last snapshot
        self._ended: set[tuple[str, str]] | None = None  # failed and rejected shown then

    def note(self, event: FeedEvent) -> None:
        """An event of `top` itself (a pause, a retry): in the feed from the next
        snapshot on (which may be under way in another thread)."""
        with self._noting:
            self._noted.append(event)

    def snapshot(self) -> TopSnapshot:
        hive = self.hive
        names = hive.agent_names()
        daemon = daemon_status(hive)
        running = isinstance(daemon, dict) and bool(daemon.get("running"))
        runtime = (daemon.get("agents") or {}) if running and isinstance(daemon, dict) else {}
        pauses = paused_agents(hive)
        held = _held(hive)
        events: list[FeedEvent] = []
        rows = []
        for name in names:
            tail = self.tails.get(name)
            if tail is None:
                tail = self.tails[name] = AuditTail(hive.audit_path(name))
            tail.refresh()
            events.extend(events_of(name, tail.new, tail.holding))
            events.extend(self._rom_event(name))
            a = runtime.get(name) if isinstance(runtime, dict) else None
            state, detail = _state(a if isinstance(a, dict) else None, running,
                                   pauses.get(name), self._disabled(name))
            tokens = tail.usage.tokens
            if isinstance(a, dict) and isinstance(a.get("tokens_today"), int):
                tokens = max(tokens, a["tokens_today"])  # the daemon's count is whole
            cost = None if tail.usage.unpriced and not tail.usage.cost else tail.usage.cost
            rows.append(AgentRow(name=name, state=state, detail=detail,
                                 tasks=tuple(held.get(name, ())),
                                 unread=Mailbox(hive, name).count_unread(),
                                 said=tail.last_said(),
                                 tokens_today=tokens, cost_today=cost))
        events.extend(self._pause_events(pauses))
        counts, newest = task_lines(hive, self.folders)
        events.extend(self._ended_events(newest, events))
        with self._noting:
            noted, self._noted = self._noted, []
        self._add_events([*events, *noted])
        waits = _waiting(daemon) if running else {}
        newest = [replace(t, waits=waits.get(t.id, "")) if t.state == "pending" else t
                  for t in newest]
        return TopSnapshot(
            root=str(hive.root), daemon=_daemon_line(daemon), agents=tuple(rows),
            counts=counts, tasks=tuple(newest), feed=tuple(self.feed),
        )

    def _pause_events(self, pauses: dict[str, PauseRecord]) -> list[FeedEvent]:
        """A pause or a resume made since the last snapshot (here or by the command)."""
        before, self._pauses = self._pauses, pauses
        if before is None:
            return []
        now = datetime.now(UTC)
        return [*(FeedEvent(now, name, "steer", f"paused by {r.by}")
                  for name, r in pauses.items() if name not in before),
                *(FeedEvent(now, name, "steer", "resumed")
                  for name in before if name not in pauses)]

    def _ended_events(self, newest: list[TaskLine], told: list[FeedEvent]) -> list[FeedEvent]:
        """Tasks newly in failed/ or rejected/ that no audit record told of (a budget
        spent before a cycle, a file the daemon could not read)."""
        ended = {(t.state, t.id): t for t in newest if t.state in ("failed", "rejected")}
        before, self._ended = self._ended, set(ended)
        if before is None:
            return []
        recent = {e.text for e in [*self.feed[-50:], *told] if e.kind == "failed"}
        out = []
        for key, t in ended.items():
            if key in before or f"failed {t.id}" in recent:
                continue
            why = f": {t.problem}" if t.problem else ""
            out.append(FeedEvent(t.changed_at, t.agent or "board", "failed",
                                 f"{t.state} {t.id}{why}"))
        return out

    def _add_events(self, events: list[FeedEvent]) -> None:
        if events:
            self.feed = sorted([*self.feed, *events], key=lambda e: e.at)[-FEED_KEPT:]

    def _rom_event(self, name: str) -> Iterator[FeedEvent]:
        """"ROM edited" once its file changed since the last refresh (not at the first)."""
        try:
            st = os.stat(self.hive.rom_path(name))
            version: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            version = None
        first = name not in self._roms
        before = self._roms.get(name)
        self._roms[name] = version
        if not first and version != before and version is not None:
            yield FeedEvent(at=datetime.now(UTC), agent=name, kind="rom",
                            text="ROM.md edited: reloaded at its next cycle")

    def _disabled(self, name: str) -> bool:
        """True if the agent's ROM says `enabled: false` (read again only when edited)."""
        registry = self._registry
        if registry is None:
            try:
                defaults = load_config(self.hive).config.agents
            except ConfigError:
                defaults = AgentSettings()
            registry = self._registry = RomRegistry(self.hive, defaults)
        try:
            return not registry.load(name).enabled
        except UserError:
            return False


def _state(a: dict[str, Any] | None, running: bool, pause: PauseRecord | None,
           disabled: bool) -> tuple[str, str]:
    """The agent's state as `top` shows it, and why."""
    if pause is not None:
        return "paused", f"by {pause.by} at {pause.at.astimezone():%H:%M}; p resumes"
    if disabled:
        return "paused", DISABLED
    if not running:
        return "stopped", ""
    if a is None:
        return "idle", "not run by this daemon"
    raw = str(a.get("state") or "")
    error = a.get("last_error") or a.get("config_error")
    if raw == "thinking":
        return "thinking", ""
    if raw.startswith("waiting for the model service"):
        return "waiting", raw
    if raw.startswith("paused"):
        return "paused", str(a.get("paused_because") or raw.removeprefix("paused").strip(" ()"))
    if raw == "error" or a.get("config_error"):
        return "error", str(error or "")
    return (raw or "idle"), ""


def _waiting(d: Any) -> dict[str, str]:
    """Why each pending task the daemon lists waits (`waiting_tasks` of status.json)."""
    items = d.get("waiting_tasks") if isinstance(d, dict) else None
    out: dict[str, str] = {}
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            out[item["id"]] = str(item.get("why") or "")
    return out


def _daemon_line(d: Any) -> DaemonLine:
    if not isinstance(d, dict):
        return DaemonLine(False, "no daemon (start one: hivemind run)")
    if d.get("error"):
        return DaemonLine(False, f"daemon state unknown: {d['error']}")
    pid = d.get("pid", "?")
    if d.get("running") and d.get("stale"):
        return DaemonLine(True, f"daemon running (pid {pid}); its status file is stale")
    if d.get("running"):
        mcp = servers_brief(d.get("mcp_servers"))
        return DaemonLine(True, f"daemon running (pid {pid}, {d.get('provider') or '?'})"
                          + (f"; {mcp}" if mcp else ""))
    if d.get("killed"):
        return DaemonLine(False, f"no daemon (pid {pid} was killed)")
    why = d.get("stopped_because") or "reason not recorded"
    return DaemonLine(False, f"no daemon (the last one stopped: {why})")


def _held(hive: Hive) -> dict[str, list[str]]:
    """The ids (file names) of the tasks each agent holds now."""
    out: dict[str, list[str]] = {}
    try:
        folders = [e for e in os.scandir(hive.active_dir) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return out
    for folder in folders:
        names = _md_names(Path(folder.path))
        if names:
            out[folder.name] = sorted(shown(n[:-3]) for n in names)
    return out


def _md_names(folder: Path) -> list[str]:
    try:
        return [n for n in os.listdir(folder) if n.endswith(".md") and not n.startswith(".")]
    except OSError:
        return []
