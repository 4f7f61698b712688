"""Reading the task board: its pending set, active tasks and load, counts, lookups.

Parsed files are cached by stat, so a scan of an unchanged board reads nothing.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.fs.filenames import is_utf8, not_utf8_reason
from hivemind.fs.paths import is_folder_link
from hivemind.fs.statcache import StatCache
from hivemind.hive.document import read_text
from hivemind.hive.frontmatter import task_from_text
from hivemind.hive.layout import Hive
from hivemind.hive.links import FOLDER_LINK_REASON, task_file_problem
from hivemind.hive.models import Task, TaskState
from hivemind.hive.quarantine import REASON_SUFFIX, quarantine
from hivemind.hive.tasks.listing import (
    active_agents,
    canonical,
    done_ids,
    md_count,
    md_entries,
    md_files,
)
from hivemind.hive.tasks.pending import PendingTasks
from hivemind.hive.tasks.ref import TaskRef
from hivemind.hive.tasks.routing import route_task
from hivemind.settings import AgentConfig

LOAD_TTL = 2.0
"""Seconds the active count per agent is trusted without listing tasks/active/ again."""


class TaskIndex:
    """The board as it is on disk: pending (settled, valid), active, done; lookups.

    Reading may still move files: unreadable ones and duplicates go to tasks/rejected/.
    """

    def __init__(self, hive: Hive, settle_time: float = 0.05) -> None:
        self.hive = hive
        self.parsed: StatCache[Task] = StatCache(read_text)
        self.pending = PendingTasks(hive, settle_time, self.parsed, self.reject)
        self._load: dict[str, int] | None = None  # active tasks per agent (see `load`)
        self._load_at = 0.0
        self._active_paths: dict[str, Path] = {}  # file path -> its Path (see active_stats)
        # Claimed copies of finished tasks that could not be removed (see
        # ending.retire): listed nowhere, until the next start removes them.
        self.leaving: set[Path] = set()

    def reject(self, path: Path, reason: str) -> None:
        """Move `path` to tasks/rejected/ with `reason` beside it, and forget it."""
        self.parsed.forget(path)
        self.pending.forget(path)
        with contextlib.suppress(FileNotFoundError):  # another process moved it first
            quarantine(self.hive, path, reason)

    # -- active tasks and load ---------------------------------------------------
    def active(self, agent: str) -> list[TaskRef]:
        """Tasks claimed by `agent` (also those left there by a previous run)."""
        return [ref for ref, _ in self.active_stats(agent)]

    def active_stats(self, agent: str) -> list[tuple[TaskRef, os.stat_result]]:
        """`active`, each task with the lstat its file was read under: a caller keying
        on the file's version needs no stat of its own."""
        found = []
        parsed, leaving = self.parsed, self.leaving
        folder = self.hive.active_dir_for(agent)
        if is_folder_link(folder):  # its files would be read from wherever it leads
            self.reject(folder, FOLDER_LINK_REASON)
            return []
        for path, st in md_files(folder, self._active_paths):
            if leaving and path in leaving:
                continue
            problem = (task_file_problem(self.hive, st) if is_utf8(path.name)
                       else not_utf8_reason(path.name))  # put there by hand (or an old version)
            try:
                if problem is not None:
                    raise FileFormatError(path, problem)
                # Not `pending.read`: a file in active/ is never one of tasks/.
                task = parsed.load(path, st, task_from_text)
            except FileNotFoundError:
                continue
            except (FileFormatError, OSError) as exc:  # OSError: a link put in its place
                self.reject(path, exc.reason if isinstance(exc, FileFormatError)
                            else f"cannot read the file: {exc.strerror}")
                continue
            found.append((TaskRef(task, path, TaskState.ACTIVE, agent, st.st_mtime), st))
        return sorted(found, key=lambda item: item[0].age_key())

    def load(self) -> dict[str, int]:
        """Active tasks per agent: kept up to date by the board's own moves, and listed
        from tasks/active/ again every LOAD_TTL seconds for moves made elsewhere."""
        now = time.monotonic()
        if self._load is None or now - self._load_at > LOAD_TTL:
            # Copies that could not be removed, while they are still there.
            self.leaving = {path for path in self.leaving if os.path.lexists(path)}
            leaving = [path.parent for path in self.leaving]
            self._load = {
                a: len(md_entries(folder)) - leaving.count(folder)
                for a in active_agents(self.hive)
                for folder in (self.hive.active_dir_for(a),)
            }
            self._load_at = now
        return dict(self._load)

    def moved(self, agent: str, delta: int) -> None:
        """A task moved into (+1) or out of (-1) active/<agent>/ (by this process or
        another one)."""
        if self._load is not None:
            self._load[agent] = max(0, self._load.get(agent, 0) + delta)

    def forget_load(self) -> None:
        """List tasks/active/ afresh at the next `load`."""
        self._load = None

    def has_read(self, path: Path) -> bool:
        """True if the board has parsed the task file at `path` as it is now (a claim of
        its own put it there, or an agent of this process has read it since)."""
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return self.parsed.get(path, st) is not None

    # -- routing -------------------------------------------------------------------
    def route(
        self, ref: TaskRef, agents: Sequence[AgentConfig], load: dict[str, int] | None = None
    ) -> str | None:
        """Who should take the task (see `routing.route_task`)."""
        return route_task(ref.task, agents, self.load() if load is None else load)

    def claimable_for(self, agent_name: str, agents: Sequence[AgentConfig]) -> list[TaskRef]:
        """Pending tasks routed to `agent_name` whose dependencies are done, best first."""
        pending = self.pending.scan()
        if not pending:
            return []
        load, done = self.load(), done_ids(self.hive)
        mine = [
            r
            for r in pending
            if self.pending.is_claimable(r, done)
            and route_task(r.task, agents, load) == agent_name
        ]
        return sorted(mine, key=TaskRef.age_key)

    # -- looking up ----------------------------------------------------------------
    def where(self, task_id: str) -> Path | None:
        """A file holding this id, found cheaply: `<id>.md` names first, then the ids of
        pending files of other names (see `PendingTasks.path_of`)."""
        for path, _, _ in canonical(self.hive, task_id):
            if os.path.lexists(path):
                return path
        return self.pending.path_of(task_id)

    def find(self, task_id: str) -> TaskRef | None:
        """Where the task with this id is now (any state but rejected)."""
        for path, state, agent in canonical(self.hive, task_id):
            if os.path.lexists(path) and path not in self.leaving:
                ref = self._ref_at(path, state, agent, task_id)
                if state is not TaskState.PENDING or ref.id == task_id:
                    return ref
        for path, st in md_files(self.hive.tasks_dir):
            if not stat.S_ISREG(st.st_mode) or not is_utf8(path.name):
                continue
            try:
                task = self.pending.read(path, st)
            except (OSError, FileFormatError):
                continue
            if task.id == task_id:
                return TaskRef(task, path, TaskState.PENDING, None, st.st_mtime)
        return None

    def _ref_at(self, path: Path, state: TaskState, agent: str | None, task_id: str) -> TaskRef:
        try:
            st = os.lstat(path)  # a link or the like is named, not read
            if task_file_problem(self.hive, st) is None:
                return TaskRef(self.pending.read(path, st), path, state, agent, st.st_mtime)
        except (OSError, FileFormatError):
            pass
        return TaskRef(Task(id=task_id, title=task_id), path, state, agent)

    def counts(self) -> dict[TaskState, int]:
        """How many files are in each state."""
        counts = dict.fromkeys(TaskState, 0)
        # Names only (no stat, no parse): this runs for every STATUS block.
        counts[TaskState.PENDING] = md_count(self.hive.tasks_dir)
        counts[TaskState.ACTIVE] = sum(self.load().values())
        counts[TaskState.DONE] = md_count(self.hive.done_dir)
        counts[TaskState.FAILED] = md_count(self.hive.failed_dir)
        with contextlib.suppress(FileNotFoundError):
            counts[TaskState.REJECTED] = sum(
                1
                for e in os.scandir(self.hive.rejected_dir)
                if not e.name.endswith(REASON_SUFFIX) and not e.name.startswith(".")
            )
        return counts
