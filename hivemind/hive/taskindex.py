"""Reading the task board: the stable pending tasks, active ones, done ids, lookups.

Parsed files are cached by stat, so a scan of an unchanged board reads nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.models import AgentConfig, Task, TaskState
from hivemind.hive.quarantine import REASON_SUFFIX, quarantine
from hivemind.hive.routing import route_task
from hivemind.hive.statcache import Sig, StatCache, sig_of
from hivemind.hive.taskref import TaskRef, md_entries, md_files

logger = logging.getLogger(__name__)


class TaskIndex:
    """The board as it is on disk: pending (settled, valid), active, done; lookups.

    Reading may still move files: unreadable ones and duplicates go to tasks/rejected/.
    """

    def __init__(self, hive: Hive, settle_time: float = 0.05, *, fsync: bool = True) -> None:
        self.hive = hive
        self.settle_time = settle_time
        self.fsync = fsync
        self._parsed: StatCache[Task] = StatCache()
        self._first_seen: dict[Path, tuple[Sig, float]] = {}
        self.unsettled = 0  # files the last scan left for later: still being written
        self._pending_ids: dict[str, str] = {}  # file name in tasks/ -> task id

    # -- reading ---------------------------------------------------------------
    def _read(self, path: Path, st: os.stat_result) -> Task:
        task = self._parsed.load(path, st, read_task)
        if path.parent == self.hive.tasks_dir:
            self._pending_ids[path.name] = task.id
        return task

    def _stable(self, path: Path, sig: Sig, now: float) -> bool:
        """Unchanged for settle_time: by its mtime, or by our own watch of it
        (a network filesystem's clock may disagree with ours)."""
        seen = self._first_seen.get(path)
        if seen is None or seen[0] != sig:
            self._first_seen[path] = seen = (sig, now)
        if self.settle_time <= 0:
            return True
        return now - sig[2] / 1e9 >= self.settle_time or now - seen[1] >= self.settle_time

    def _reject(self, path: Path, reason: str) -> None:
        self._parsed.forget(path)
        self._first_seen.pop(path, None)
        with contextlib.suppress(FileNotFoundError):  # another process moved it first
            quarantine(self.hive, path, reason)

    def scan_pending(self) -> list[TaskRef]:
        """Stable, readable pending tasks; unreadable files and duplicates are rejected."""
        now = time.time()
        refs: list[TaskRef] = []
        present: set[Path] = set()
        self.unsettled = 0
        for path, st in md_files(self.hive.tasks_dir):
            present.add(path)
            if stat.S_ISLNK(st.st_mode):
                self._reject(path, "a symbolic link is not read as a task; copy the file instead")
                continue
            if not stat.S_ISREG(st.st_mode):
                self._reject(path, "not a regular file")
                continue
            if not self._stable(path, sig_of(st), now):
                self.unsettled += 1
                continue
            try:
                task = self._read(path, st)
            except FileNotFoundError:
                continue  # claimed by someone else meanwhile
            except FileFormatError as exc:
                self._reject(path, exc.reason)
                continue
            except OSError as exc:
                self._reject(path, f"cannot read the file: {exc.strerror}")
                continue
            refs.append(TaskRef(task, path, TaskState.PENDING, None, st.st_mtime))
        for gone in [p for p in self._first_seen if p not in present]:
            del self._first_seen[gone]
        self._parsed.keep_only(self.hive.tasks_dir, present)
        names = {p.name for p in present}
        self._pending_ids = {n: i for n, i in self._pending_ids.items() if n in names}
        return self._without_duplicates(refs)

    def _without_duplicates(self, refs: list[TaskRef]) -> list[TaskRef]:
        """The first file of an id (by age) stays; later ones are rejected."""
        elsewhere = self._placed_ids()
        first: dict[str, Path] = {}
        kept: list[TaskRef] = []
        for ref in sorted(refs, key=lambda r: (r.mtime, r.path.name)):
            other = first.get(ref.id) or elsewhere.get(ref.id)
            if other is not None and os.path.lexists(other):
                where = self.hive.relative(other)
                self._reject(ref.path, f"duplicate task id {ref.id} (already in {where})")
                continue
            first[ref.id] = ref.path
            kept.append(ref)
        return kept

    def _placed(self) -> Iterator[tuple[Path, TaskState, str | None]]:
        """Every task file outside the drop zone with its state and agent."""
        # Names only: a stat per file would make every scan cost O(finished tasks) syscalls.
        for agent in self.active_agents():
            for entry in md_entries(self.hive.active_dir_for(agent)):
                yield Path(entry.path), TaskState.ACTIVE, agent
        for folder, state in (
            (self.hive.done_dir, TaskState.DONE),
            (self.hive.failed_dir, TaskState.FAILED),
        ):
            for entry in md_entries(folder):
                yield Path(entry.path), state, None

    def _placed_ids(self) -> dict[str, Path]:
        return {path.stem: path for path, _, _ in self._placed()}

    def active_agents(self) -> list[str]:
        """Names of the folders in tasks/active/."""
        try:
            return sorted(
                e.name
                for e in os.scandir(self.hive.active_dir)
                if e.is_dir(follow_symlinks=False) and not is_temp_name(e.name)
            )
        except FileNotFoundError:
            return []

    def active(self, agent: str) -> list[TaskRef]:
        """Tasks claimed by `agent` (also those left there by a previous run)."""
        refs = []
        for path, st in md_files(self.hive.active_dir_for(agent)):
            try:
                task = self._read(path, st)
            except FileNotFoundError:
                continue
            except FileFormatError as exc:
                self._reject(path, exc.reason)
                continue
            refs.append(TaskRef(task, path, TaskState.ACTIVE, agent, st.st_mtime))
        return sorted(refs, key=TaskRef.age_key)

    def load(self) -> dict[str, int]:
        """Active tasks per agent."""
        return {
            a: len(md_entries(self.hive.active_dir_for(a))) for a in self.active_agents()
        }

    def done_ids(self) -> set[str]:
        """Ids of the tasks in done/."""
        return {entry.name[:-3] for entry in md_entries(self.hive.done_dir)}

    def is_claimable(self, ref: TaskRef, done: set[str] | None = None) -> bool:
        """Pending and every `depends_on` id is in done/."""
        if ref.state is not TaskState.PENDING:
            return False
        if not ref.task.depends_on:
            return True
        done = self.done_ids() if done is None else done
        return all(dep in done for dep in ref.task.depends_on)

    def route(
        self, ref: TaskRef, agents: Sequence[AgentConfig], load: dict[str, int] | None = None
    ) -> str | None:
        """Who should take the task (see `routing.route_task`)."""
        return route_task(ref.task, agents, self.load() if load is None else load)

    def claimable_for(self, agent_name: str, agents: Sequence[AgentConfig]) -> list[TaskRef]:
        """Pending tasks routed to `agent_name` whose dependencies are done, best first."""
        pending = self.scan_pending()
        if not pending:
            return []
        load, done = self.load(), self.done_ids()
        mine = [
            r
            for r in pending
            if self.is_claimable(r, done) and route_task(r.task, agents, load) == agent_name
        ]
        return sorted(mine, key=TaskRef.age_key)

    # -- looking up ----------------------------------------------------------------
    def _canonical(self, task_id: str) -> Iterator[tuple[Path, TaskState, str | None]]:
        """Where the board itself would have put this id (`<id>.md` in each folder)."""
        name = f"{task_id}.md"
        yield self.hive.tasks_dir / name, TaskState.PENDING, None
        for agent in self.active_agents():
            yield self.hive.active_dir_for(agent) / name, TaskState.ACTIVE, agent
        yield self.hive.done_dir / name, TaskState.DONE, None
        yield self.hive.failed_dir / name, TaskState.FAILED, None

    def _where(self, task_id: str) -> Path | None:
        """A file holding this id, found cheaply: `<id>.md` names first, then the ids of
        pending files of other names, each parsed once (the scan catches later edits)."""
        for path, _, _ in self._canonical(task_id):
            if os.path.lexists(path):
                return path
        try:
            entries = list(os.scandir(self.hive.tasks_dir))
        except FileNotFoundError:
            return None
        for entry in entries:  # plain string work: this runs for every create
            name = entry.name
            if not name.endswith(".md") or is_temp_name(name):
                continue
            known = self._pending_ids.get(name)
            if known is None:
                try:
                    st = entry.stat(follow_symlinks=False)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    known = self._read(Path(entry.path), st).id
                except (OSError, FileFormatError):
                    continue
            if known == task_id:
                return Path(entry.path)
        return None

    def find(self, task_id: str) -> TaskRef | None:
        """Where the task with this id is now (any state but rejected)."""
        for path, state, agent in self._canonical(task_id):
            if os.path.lexists(path):
                ref = self._ref_at(path, state, agent, task_id)
                if state is not TaskState.PENDING or ref.id == task_id:
                    return ref
        for path, st in md_files(self.hive.tasks_dir):
            if not stat.S_ISREG(st.st_mode):
                continue
            try:
                task = self._read(path, st)
            except (OSError, FileFormatError):
                continue
            if task.id == task_id:
                return TaskRef(task, path, TaskState.PENDING, None, st.st_mtime)
        return None

    def _ref_at(self, path: Path, state: TaskState, agent: str | None, task_id: str) -> TaskRef:
        try:
            st = path.stat()
            task = self._read(path, st)
        except (OSError, FileFormatError):
            return TaskRef(Task(id=task_id, title=task_id), path, state, agent)
        return TaskRef(task, path, state, agent, st.st_mtime)

    def counts(self) -> dict[TaskState, int]:
        """How many files are in each state."""
        counts = dict.fromkeys(TaskState, 0)
        counts[TaskState.PENDING] = sum(1 for _ in md_files(self.hive.tasks_dir))
        for _, state, _ in self._placed():
            counts[state] += 1
        with contextlib.suppress(FileNotFoundError):
            counts[TaskState.REJECTED] = sum(
                1
                for e in os.scandir(self.hive.rejected_dir)
                if not e.name.endswith(REASON_SUFFIX) and not e.name.startswith(".")
            )
        return counts
