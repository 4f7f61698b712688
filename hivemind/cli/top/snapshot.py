"""What `hivemind top` shows, gathered from the hive's files alone.

`HiveReader.snapshot()` reads status.json, the task folders, the pauses and the
audit logs' ends into a `TopSnapshot`: no lock is taken and nothing is written, so
it works beside a daemon started elsewhere (or none) and never slows it down. The
widgets (`top.app`) only draw snapshots; tests and `bench/bench_top.py` use this
module without a terminal.
"""

from __future__ import annotations

import heapq
import os
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hivemind.cli.top.audit_tail import AuditTail
from hivemind.cli.top.feed import FeedEvent, events_of
from hivemind.errors import ConfigError, UserError
from hivemind.hive.config import load_config
from hivemind.hive.filenames import shown
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.quarantine import read_reason
from hivemind.hive.rom import RomRegistry
from hivemind.hive.status import daemon_status
from hivemind.hive.steering import PauseRecord, paused_agents
from hivemind.settings import AgentSettings

STATES = ("pending", "active", "failed", "done", "rejected")
"""The task folders, in the order `top` shows them."""

NEWEST = {"pending": 5, "active": 20, "failed": 10, "done": 5, "rejected": 5}
"""How many of the newest tasks of each state are shown (the rest are counted)."""

FEED_KEPT = 300


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
class TaskLine:
    state: str
    id: str
    title: str
    agent: str
    changed_at: datetime
    problem: str = ""
    waits: str = ""  # why a pending task is not taken (the daemon's waiting list)


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
        counts, newest = _tasks(hive, self.folders)
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
        return "paused", "enabled: false in its ROM"
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
        return DaemonLine(True, f"daemon running (pid {pid}, {d.get('provider') or '?'})")
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


def _folders(hive: Hive, state: str) -> list[tuple[str, str]]:
    if state == "active":
        try:
            return [(e.path, e.name) for e in os.scandir(hive.active_dir)
                    if e.is_dir(follow_symlinks=False)]
        except OSError:
            return []
    folder = {"pending": hive.tasks_dir, "failed": hive.failed_dir, "done": hive.done_dir,
              "rejected": hive.rejected_dir}[state]
    return [(os.fspath(folder), "")]


RACY = 2.0
"""Seconds within which a folder's mtime may hide a later change (a coarse clock):
such a folder is listed again, whatever its mtime says."""


@dataclass
class _Listing:
    """One task folder as last listed: its mtime, how many tasks, the newest."""

    mtime_ns: int
    count: int
    newest: list[tuple[float, str]]


class FolderCache:
    """Task folders listed again only when their mtime changed (a task came or went:
    the board moves whole files in and out, by renames)."""

    def __init__(self) -> None:
        self._seen: dict[str, _Listing] = {}

    def listing(self, folder: str, keep: int) -> _Listing | None:
        try:
            st = os.stat(folder)
        except OSError:
            self._seen.pop(folder, None)
            return None
        known = self._seen.get(folder)
        fresh = time.time() - st.st_mtime > RACY
        if known is not None and known.mtime_ns == st.st_mtime_ns and fresh \
                and len(known.newest) >= min(keep, known.count):
            return known
        try:
            scan = list(os.scandir(folder))
        except OSError:
            return None
        entries: list[tuple[float, str]] = []
        for e in scan:
            if not e.name.endswith(".md") or e.name.startswith("."):
                continue
            try:
                est = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(est.st_mode):
                entries.append((est.st_mtime, e.path))
        listing = _Listing(st.st_mtime_ns, len(entries), heapq.nlargest(keep, entries))
        self._seen[folder] = listing
        return listing


def _tasks(hive: Hive, cache: FolderCache) -> tuple[dict[str, int], list[TaskLine]]:
    """How many tasks each state has, and its newest (only those files are read)."""
    counts: dict[str, int] = {}
    lines: list[TaskLine] = []
    for state in STATES:
        entries: list[tuple[float, str, str]] = []
        count = 0
        for folder, holder in _folders(hive, state):
            listing = cache.listing(folder, NEWEST[state])
            if listing is not None:
                count += listing.count
                entries.extend((mtime, path, holder) for mtime, path in listing.newest)
        counts[state] = count
        for mtime, path, holder in heapq.nlargest(NEWEST[state], entries):
            lines.append(_line(state, Path(path), holder, mtime))
    return counts, lines


def _line(state: str, path: Path, holder: str, mtime: float) -> TaskLine:
    when = datetime.fromtimestamp(mtime, UTC)
    name = shown(path.name[:-3])
    if state == "rejected":
        reason = " ".join(read_reason(path).split())
        return TaskLine(state, name, "", "", when, reason or "no reason kept")
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # read as the board would
            return TaskLine(state, name, "", holder, when, "a link (not read)")
        task = read_task(path)
    except (OSError, UserError) as exc:
        return TaskLine(state, name, "", holder, when, str(exc).rsplit(": ", 1)[-1])
    agent = holder or (task.agent or "" if state in ("done", "failed") else "")
    if state == "failed":
        problem = _last_failure(task.body)
        return TaskLine(state, task.id, task.title, agent, when, problem)
    return TaskLine(state, task.id, task.title, agent or (
        f"→ {task.assignee}" if task.assignee else ""), when)


def _last_failure(body: str) -> str:
    """The reason of the task's last failed attempt (its last `## Attempt N failed`)."""
    _, sep, rest = body.rpartition("\n## Attempt ")
    if not sep:
        return ""
    lines = [line.strip() for line in rest.splitlines()[1:] if line.strip()]
    return lines[0] if lines else ""
