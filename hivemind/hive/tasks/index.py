"""Reading the task board: the stable pending tasks, active ones, done ids, lookups.

Parsed files are cached by stat, so a scan of an unchanged board reads nothing.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import math
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.fs.filenames import is_utf8, not_utf8_reason
from hivemind.fs.paths import is_folder_link
from hivemind.fs.settling import WRITER_RECHECK, fallback_for, whole_in, writer_open
from hivemind.fs.statcache import RACY_MARGIN, Sig, StatCache, sig_of
from hivemind.hive.document import read_text
from hivemind.hive.frontmatter import task_from_text
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.links import FOLDER_LINK_REASON, task_file_problem
from hivemind.hive.models import Task, TaskState
from hivemind.hive.quarantine import REASON_SUFFIX, quarantine
from hivemind.hive.tasks.listing import md_count, md_entries, md_files
from hivemind.hive.tasks.ref import TaskRef
from hivemind.hive.tasks.routing import route_task
from hivemind.settings import AgentConfig

logger = logging.getLogger(__name__)

LOAD_TTL = 2.0
"""Seconds the active count per agent is trusted without listing tasks/active/ again."""
EMPTY_GRACE = 10.0
"""Seconds an empty task file is given to get its text before it is rejected: a shell's
`cmd > tasks/x.md` creates the file at once and fills it when `cmd` writes."""


class TaskIndex:
    """The board as it is on disk: pending (settled, valid), active, done; lookups.

    Reading may still move files: unreadable ones and duplicates go to tasks/rejected/.
    """

    def __init__(self, hive: Hive, settle_time: float = 0.05, *, fsync: bool = True) -> None:
        self.hive = hive
        self.settle_time = settle_time
        self.fsync = fsync
        self._parsed: StatCache[Task] = StatCache(read_text)
        self._first_seen: dict[Path, tuple[Sig, float]] = {}
        self._pending_ids: dict[str, str] = {}  # file name in tasks/ -> task id
        # The pending set: settled, readable, unique ids; kept between refreshes.
        self._pending: dict[Path, TaskRef] = {}
        self._pending_sig: dict[Path, Sig] = {}
        self._pending_by_id: dict[str, Path] = {}
        # (age key, seq, path), sorted; entries whose seq is no longer live are skipped.
        self._order: list[tuple[tuple[int, float, str], int, Path]] = []
        self._pending_seq: dict[Path, int] = {}
        self._seq = 0
        self._stale = 0
        self._settling: set[Path] = set()  # files the last refresh left for later
        self._look_again = math.inf  # when the soonest of them may have settled
        # Files the watcher handed on once their writer closed them, as they were then
        # (what settles them where the kernel cannot tell: see `_writer_wait`).
        self._vouched: dict[Path, Sig] = {}
        self._moved_in: set[Path] = set()  # files this board put into tasks/ itself
        self._load: dict[str, int] | None = None  # active tasks per agent (see `load`)
        self._active_paths: dict[str, Path] = {}  # file path -> its Path (see active_stats)
        self._load_at = 0.0
        # Claimed copies of finished tasks that could not be removed (see
        # TaskBoard._retire): listed nowhere, until the next start removes them.
        self._leaving: set[Path] = set()
        # Told of every move into or out of active/<agent>/ this board makes (a worker
        # process passes its moves on to the lead's board, see `moved_elsewhere`).
        self.on_load_change: Callable[[str, int], None] | None = None

    @property
    def unsettled(self) -> int:
        """Files the last refresh left for later: still being written."""
        return len(self._settling)

    @property
    def settle_wait(self) -> float:
        """Seconds until one of the `unsettled` files may have settled: when to refresh."""
        return max(min(self._look_again - time.time(), 60.0), 0.01)

    def _settle_later(self, path: Path, at: float) -> None:
        """Look at `path` again at the next refresh; it may have settled by `at`."""
        self._settling.add(path)
        self._look_again = min(self._look_again, at)

    # -- reading ---------------------------------------------------------------
    def _read(self, path: Path, st: os.stat_result) -> Task:
        task = self._parsed.load(path, st, task_from_text)
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

    def _young(self, path: Path, now: float) -> bool:
        """Changed less than `EMPTY_GRACE` ago, by its mtime and by our own watch of it
        (see `_stable`, which has just noted when we first saw this version)."""
        sig, seen = self._first_seen[path]
        return now - sig[2] / 1e9 < EMPTY_GRACE and now - seen < EMPTY_GRACE

    def _writer_wait(self, path: Path, sig: Sig, now: float) -> float:
        """Seconds before the file may be whole (0.0: it is): no process has it open for
        writing; where that cannot be told, the watcher saw its writer close it
        (`_vouched`), or it has been still for the fallback time."""
        closed = True if self._vouched.get(path) == sig else None
        still_for = max(now - sig[2] / 1e9, now - self._first_seen[path][1])
        return whole_in(path, still_for, closed, fallback_for(self.settle_time))

    def _reject(self, path: Path, reason: str) -> None:
        self._parsed.forget(path)
        self._first_seen.pop(path, None)
        self._vouched.pop(path, None)
        with contextlib.suppress(FileNotFoundError):  # another process moved it first
            quarantine(self.hive, path, reason)

    def scan_pending(self, changed: Iterable[Path] | None = None) -> list[TaskRef]:
        """Stable, readable pending tasks, best first (priority, then age); unreadable
        files and duplicates are rejected. See `refresh_pending` for `changed`."""
        self.refresh_pending(changed)
        return list(self.pending_in_order())

    def refresh_pending(self, changed: Iterable[Path] | None = None) -> None:
        """Bring the pending set up to date with tasks/.

        Without `changed`: list the whole folder. With it: look again only at those
        files, at files still settling, and at files this board moved into tasks/
        itself; the caller vouches that nothing else changed (the daemon passes the
        watcher's events, whose own rescan catches what the OS did not report, and
        still lists the whole folder now and then).
        """
        now = time.time()
        if changed is None:
            self._full_scan(now)
            return
        # Files named by the watcher were handed on once whole, as were those this board
        # put into tasks/ itself.
        named = set(changed) | self._moved_in
        look = named | self._settling
        self._settling, self._moved_in, self._look_again = set(), set(), math.inf
        fresh: list[TaskRef] = []
        for path in look:
            if path.parent != self.hive.tasks_dir or is_temp_name(path.name):
                continue
            if not path.name.endswith(".md"):
                continue
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                self._drop_pending(path)
                self._first_seen.pop(path, None)
                self._vouched.pop(path, None)
                continue
            if stat.S_ISDIR(st.st_mode):
                continue
            if path in named:
                self._vouched[path] = sig_of(st)
            ref = self._check(path, st, now)
            if ref is not None:
                fresh.append(ref)
        self._admit(fresh)

    def _full_scan(self, now: float) -> None:
        present: set[Path] = set()
        fresh: list[TaskRef] = []
        self._settling, self._moved_in, self._look_again = set(), set(), math.inf
        for path, st in md_files(self.hive.tasks_dir):
            present.add(path)
            ref = self._check(path, st, now)
            if ref is not None:
                fresh.append(ref)
        for gone in [p for p in self._first_seen if p not in present]:
            del self._first_seen[gone]
        for gone in [p for p in self._vouched if p not in present]:
            del self._vouched[gone]
        for gone in [p for p in self._pending if p not in present]:
            self._drop_pending(gone)
        self._parsed.keep_only(self.hive.tasks_dir, present)
        names = {p.name for p in present}
        self._pending_ids = {n: i for n, i in self._pending_ids.items() if n in names}
        self._admit(fresh)

    def _check(self, path: Path, st: os.stat_result, now: float) -> TaskRef | None:
        """The pending task in `path` if it is settled and readable (else None; an
        unreadable file is rejected). An unchanged file gives back its known ref."""
        if not is_utf8(path.name):
            # Its id (the stem) could be written to no file, log or request.
            self._drop_pending(path)
            self._reject(path, not_utf8_reason(path.name))
            return None
        if (problem := task_file_problem(self.hive, st)) is not None:
            self._drop_pending(path)
            self._reject(path, problem)
            return None
        sig = sig_of(st)
        stable = self._stable(path, sig, now)
        if not stable or (st.st_size == 0 and self._young(path, now)):
            # Still being written; or created and not written yet (`cmd > tasks/x.md`,
            # a slow cmd): an empty file is rejected once it has stayed empty a while.
            self._drop_pending(path)
            self._settle_later(path, now + (WRITER_RECHECK if stable else self.settle_time))
            return None
        known = self._pending.get(path)
        if known is not None and self._pending_sig.get(path) == sig:
            cached = self._parsed.get(path, st)
            if cached is known.task:
                return known
        if (wait := self._writer_wait(path, sig, now)) > 0:
            # Its writer has not closed it (`( echo "# T"; slow_cmd; echo more ) > x.md`):
            # what it writes after a claim would go into the claimed file, and be lost.
            self._drop_pending(path)
            self._settle_later(path, now + wait)
            return None
        try:
            task = self._read(path, st)
        except FileNotFoundError:
            self._drop_pending(path)
            return None  # claimed by someone else meanwhile
        except FileFormatError as exc:
            self._drop_pending(path)
            self._reject(path, exc.reason)
            return None
        except OSError as exc:
            self._drop_pending(path)
            self._reject(path, f"cannot read the file: {exc.strerror}")
            return None
        ref = TaskRef(task, path, TaskState.PENDING, None, st.st_mtime)
        self._pending_sig[path] = sig
        if now - st.st_mtime < RACY_MARGIN:
            # May change again within the same mtime: look again.
            self._settle_later(path, now + RACY_MARGIN)
        return ref

    def _admit(self, fresh: list[TaskRef]) -> None:
        """Put checked refs in the pending set; a file whose id is already taken (by an
        older pending file or a task elsewhere on the board) is rejected."""
        new = [r for r in fresh if self._pending.get(r.path) is not r]
        if not new:
            return
        for ref in new:  # an edited file may have changed its id: its old entry goes
            self._drop_pending(ref.path, keep_sig=True)
        elsewhere = self._placed_lookup({r.id for r in new})
        for ref in sorted(new, key=lambda r: (r.mtime, r.path.name)):
            other = self._pending_by_id.get(ref.id) or elsewhere.get(ref.id)
            if other is not None and other != ref.path and os.path.lexists(other):
                where = self.hive.relative(other)
                self._pending_sig.pop(ref.path, None)
                self._reject(ref.path, f"duplicate task id {ref.id} (then in {where})")
                continue
            self._pending[ref.path] = ref
            self._pending_by_id[ref.id] = ref.path
            self._seq += 1
            self._pending_seq[ref.path] = self._seq
            bisect.insort(self._order, (ref.age_key(), self._seq, ref.path))

    def _drop_pending(self, path: Path, *, keep_sig: bool = False) -> None:
        """Forget a file of the pending set (claimed, gone, rejected or changed)."""
        ref = self._pending.pop(path, None)
        self._pending_seq.pop(path, None)
        if not keep_sig:
            self._pending_sig.pop(path, None)
        if ref is not None:
            if self._pending_by_id.get(ref.id) == path:
                del self._pending_by_id[ref.id]
            self._stale += 1
            if self._stale > 64 and self._stale > len(self._pending):
                live = self._pending_seq
                self._order = [item for item in self._order if live.get(item[2]) == item[1]]
                self._stale = 0

    @property
    def pending_count(self) -> int:
        """Size of the pending set as of the last refresh."""
        return len(self._pending)

    def is_pending(self, ref: TaskRef) -> bool:
        """`ref` is (still) the pending set's entry for its file."""
        return self._pending.get(ref.path) is ref

    def pending_in_order(self) -> Iterator[TaskRef]:
        """The pending set as of the last refresh, best first (priority, then age)."""
        live = self._pending_seq
        for _, seq, path in list(self._order):
            if live.get(path) == seq:
                yield self._pending[path]

    def _placed_lookup(self, ids: set[str]) -> dict[str, Path]:
        """Where each of `ids` already is outside the drop zone (as `<id>.md`): a few
        lookups for a few ids, one listing of the board for many."""
        agents = self.active_agents()
        if len(ids) * (len(agents) + 2) <= 256:
            found: dict[str, Path] = {}
            for task_id in ids:
                for path, state, _ in self._canonical(task_id):
                    if state is not TaskState.PENDING and os.path.lexists(path):
                        found[task_id] = path
                        break
            return found
        return {
            name[:-3]: Path(folder, name)
            for folder, name in self._placed_names(agents)
            if name[:-3] in ids
        }

    def _placed_names(self, agents: Sequence[str] | None = None) -> Iterator[tuple[str, str]]:
        """(folder, file name) of every task file outside the drop zone."""
        # Names only: a stat per file would make every scan cost O(finished tasks) syscalls.
        folders = [self.hive.active_dir_for(a) for a in (agents or self.active_agents())]
        folders += [self.hive.done_dir, self.hive.failed_dir]
        for folder in folders:
            for entry in md_entries(folder):
                yield str(folder), entry.name

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
        return [ref for ref, _ in self.active_stats(agent)]

    def active_stats(self, agent: str) -> list[tuple[TaskRef, os.stat_result]]:
        """`active`, each task with the lstat its file was read under: a caller keying
        on the file's version needs no stat of its own."""
        found = []
        parsed, leaving = self._parsed, self._leaving
        folder = self.hive.active_dir_for(agent)
        if is_folder_link(folder):  # its files would be read from wherever it leads
            self._reject(folder, FOLDER_LINK_REASON)
            return []
        for path, st in md_files(folder, self._active_paths):
            if leaving and path in leaving:
                continue
            problem = (task_file_problem(self.hive, st) if is_utf8(path.name)
                       else not_utf8_reason(path.name))  # put there by hand (or an old version)
            try:
                if problem is not None:
                    raise FileFormatError(path, problem)
                # Not `_read`: a file in active/ is never one of tasks/ (no pending id).
                task = parsed.load(path, st, task_from_text)
            except FileNotFoundError:
                continue
            except (FileFormatError, OSError) as exc:  # OSError: a link put in its place
                self._reject(path, exc.reason if isinstance(exc, FileFormatError)
                             else f"cannot read the file: {exc.strerror}")
                continue
            found.append((TaskRef(task, path, TaskState.ACTIVE, agent, st.st_mtime), st))
        return sorted(found, key=lambda item: item[0].age_key())

    def load(self) -> dict[str, int]:
        """Active tasks per agent: kept up to date by this board's own moves, and listed
        from tasks/active/ again every LOAD_TTL seconds for moves made elsewhere."""
        now = time.monotonic()
        if self._load is None or now - self._load_at > LOAD_TTL:
            # Copies that could not be removed, while they are still there.
            self._leaving = {path for path in self._leaving if os.path.lexists(path)}
            leaving = [path.parent for path in self._leaving]
            self._load = {
                a: len(md_entries(folder)) - leaving.count(folder)
                for a in self.active_agents()
                for folder in (self.hive.active_dir_for(a),)
            }
            self._load_at = now
        return dict(self._load)

    def _loaded(self, agent: str, delta: int) -> None:
        """This board moved a task into (+1) or out of (-1) active/<agent>/."""
        self.moved_elsewhere(agent, delta)
        if self.on_load_change is not None:
            self.on_load_change(agent, delta)

    def moved_elsewhere(self, agent: str, delta: int) -> None:
        """Another board (another process) moved a task into or out of active/<agent>/."""
        if self._load is not None:
            self._load[agent] = max(0, self._load.get(agent, 0) + delta)

    def done_ids(self) -> set[str]:
        """Ids of the tasks in done/."""
        return {entry.name[:-3] for entry in md_entries(self.hive.done_dir)}

    def is_claimable(self, ref: TaskRef, done: set[str] | None = None) -> bool:
        """Pending, every `depends_on` id is in done/, and no process has its file open
        for writing (the claim's rename would not stop the writer: what it wrote next
        would go into the claimed file, and be lost once the task is finished)."""
        if ref.state is not TaskState.PENDING:
            return False
        if ref.task.depends_on:
            done = self.done_ids() if done is None else done
            if not all(dep in done for dep in ref.task.depends_on):
                return False
        if writer_open(ref.path):  # opened again since it was read: read again once closed
            self._drop_pending(ref.path)
            self._settle_later(ref.path, time.time() + WRITER_RECHECK)
            return False
        return True

    def has_read(self, path: Path) -> bool:
        """True if this board has parsed the task file at `path` as it is now (a claim of
        its own put it there, or an agent of this process has read it since)."""
        try:
            st = os.lstat(path)
        except OSError:
            return False
        return self._parsed.get(path, st) is not None

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
            if not name.endswith(".md") or is_temp_name(name) or not is_utf8(name):
                continue  # (a name that is not UTF-8 is rejected by the next scan)
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
            if os.path.lexists(path) and path not in self._leaving:
                ref = self._ref_at(path, state, agent, task_id)
                if state is not TaskState.PENDING or ref.id == task_id:
                    return ref
        for path, st in md_files(self.hive.tasks_dir):
            if not stat.S_ISREG(st.st_mode) or not is_utf8(path.name):
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
            st = os.lstat(path)  # a link or the like is named, not read
            if task_file_problem(self.hive, st) is None:
                return TaskRef(self._read(path, st), path, state, agent, st.st_mtime)
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
