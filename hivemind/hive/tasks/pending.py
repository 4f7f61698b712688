"""The drop zone, tasks/: files settle, are read and checked, and wait in order.

A file is taken once it is whole (its writer closed it, or it has been still a
while) and readable; an unreadable one or a duplicate id is rejected. The set is
kept between refreshes, so a look at an unchanged drop zone reads nothing.
"""

from __future__ import annotations

import bisect
import math
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.fs.filenames import is_utf8, not_utf8_reason
from hivemind.fs.settling import WRITER_RECHECK, fallback_for, whole_in, writer_open
from hivemind.fs.statcache import RACY_MARGIN, Sig, StatCache, sig_of
from hivemind.hive.frontmatter import task_from_text
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.links import task_file_problem
from hivemind.hive.models import Task, TaskState
from hivemind.hive.tasks.listing import done_ids, md_files, placed
from hivemind.hive.tasks.ref import TaskRef

EMPTY_GRACE = 10.0
"""Seconds an empty task file is given to get its text before it is rejected: a shell's
`cmd > tasks/x.md` creates the file at once and fills it when `cmd` writes."""


class PendingTasks:
    """The pending set: settled, readable files of tasks/ with unique ids, best first."""

    def __init__(
        self, hive: Hive, settle_time: float, parsed: StatCache[Task],
        reject: Callable[[Path, str], None],
    ) -> None:
        self.hive = hive
        self.settle_time = settle_time
        self.parsed = parsed  # shared with the rest of the board: a claim keeps the parse
        self.reject = reject
        self._first_seen: dict[Path, tuple[Sig, float]] = {}
        self._ids: dict[str, str] = {}  # file name in tasks/ -> task id
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
        self._moved_in: set[Path] = set()  # files the board put into tasks/ itself

    @property
    def unsettled(self) -> int:
        """Files the last refresh left for later: still being written."""
        return len(self._settling)

    @property
    def settle_wait(self) -> float:
        """Seconds until one of the `unsettled` files may have settled: when to refresh."""
        return max(min(self._look_again - time.time(), 60.0), 0.01)

    def settle_later(self, path: Path, at: float) -> None:
        """Look at `path` again at the next refresh; it may have settled by `at`."""
        self._settling.add(path)
        self._look_again = min(self._look_again, at)

    def moved_in(self, path: Path, task_id: str | None = None) -> None:
        """The board put `path` into tasks/ itself (holding `task_id`, if known): the
        next refresh looks at it without being told."""
        if task_id is not None:
            self._ids[path.name] = task_id
        self._moved_in.add(path)

    def forget(self, path: Path) -> None:
        """Forget what was seen of `path` (it is being rejected)."""
        self._first_seen.pop(path, None)
        self._vouched.pop(path, None)

    # -- reading ---------------------------------------------------------------
    def read(self, path: Path, st: os.stat_result) -> Task:
        """The task in `path` as of `st` (parsed once per version); a file of tasks/
        has its id noted (see `path_of`)."""
        task = self.parsed.load(path, st, task_from_text)
        if path.parent == self.hive.tasks_dir:
            self._ids[path.name] = task.id
        return task

    def path_of(self, task_id: str) -> Path | None:
        """A file of tasks/ holding this id under another name than `<id>.md`: the ids
        of such files are parsed once (the scan catches later edits)."""
        try:
            entries = list(os.scandir(self.hive.tasks_dir))
        except FileNotFoundError:
            return None
        for entry in entries:  # plain string work: this runs for every create
            name = entry.name
            if not name.endswith(".md") or is_temp_name(name) or not is_utf8(name):
                continue  # (a name that is not UTF-8 is rejected by the next scan)
            known = self._ids.get(name)
            if known is None:
                try:
                    st = entry.stat(follow_symlinks=False)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    known = self.read(Path(entry.path), st).id
                except (OSError, FileFormatError):
                    continue
            if known == task_id:
                return Path(entry.path)
        return None

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

    def scan(self, changed: Iterable[Path] | None = None) -> list[TaskRef]:
        """Stable, readable pending tasks, best first (priority, then age); unreadable
        files and duplicates are rejected. See `refresh` for `changed`."""
        self.refresh(changed)
        return list(self.in_order())

    def refresh(self, changed: Iterable[Path] | None = None) -> None:
        """Bring the pending set up to date with tasks/.

        Without `changed`: list the whole folder. With it: look again only at those
        files, at files still settling, and at files the board moved into tasks/
        itself; the caller vouches that nothing else changed (the daemon passes the
        watcher's events, whose own rescan catches what the OS did not report, and
        still lists the whole folder now and then).
        """
        now = time.time()
        if changed is None:
            self._full_scan(now)
            return
        # Files named by the watcher were handed on once whole, as were those the board
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
                self.drop(path)
                self.forget(path)
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
            self.drop(gone)
        self.parsed.keep_only(self.hive.tasks_dir, present)
        names = {p.name for p in present}
        self._ids = {n: i for n, i in self._ids.items() if n in names}
        self._admit(fresh)

    def _check(self, path: Path, st: os.stat_result, now: float) -> TaskRef | None:
        """The pending task in `path` if it is settled and readable (else None; an
        unreadable file is rejected). An unchanged file gives back its known ref."""
        if not is_utf8(path.name):
            # Its id (the stem) could be written to no file, log or request.
            self.drop(path)
            self.reject(path, not_utf8_reason(path.name))
            return None
        if (problem := task_file_problem(self.hive, st)) is not None:
            self.drop(path)
            self.reject(path, problem)
            return None
        sig = sig_of(st)
        stable = self._stable(path, sig, now)
        if not stable or (st.st_size == 0 and self._young(path, now)):
            # Still being written; or created and not written yet (`cmd > tasks/x.md`,
            # a slow cmd): an empty file is rejected once it has stayed empty a while.
            self.drop(path)
            self.settle_later(path, now + (WRITER_RECHECK if stable else self.settle_time))
            return None
        known = self._pending.get(path)
        if known is not None and self._pending_sig.get(path) == sig:
            cached = self.parsed.get(path, st)
            if cached is known.task:
                return known
        if (wait := self._writer_wait(path, sig, now)) > 0:
            # Its writer has not closed it (`( echo "# T"; slow_cmd; echo more ) > x.md`):
            # what it writes after a claim would go into the claimed file, and be lost.
            self.drop(path)
            self.settle_later(path, now + wait)
            return None
        try:
            task = self.read(path, st)
        except FileNotFoundError:
            self.drop(path)
            return None  # claimed by someone else meanwhile
        except FileFormatError as exc:
            self.drop(path)
            self.reject(path, exc.reason)
            return None
        except OSError as exc:
            self.drop(path)
            self.reject(path, f"cannot read the file: {exc.strerror}")
            return None
        ref = TaskRef(task, path, TaskState.PENDING, None, st.st_mtime)
        self._pending_sig[path] = sig
        if now - st.st_mtime < RACY_MARGIN:
            # May change again within the same mtime: look again.
            self.settle_later(path, now + RACY_MARGIN)
        return ref

    def _admit(self, fresh: list[TaskRef]) -> None:
        """Put checked refs in the pending set; a file whose id is already taken (by an
        older pending file or a task elsewhere on the board) is rejected."""
        new = [r for r in fresh if self._pending.get(r.path) is not r]
        if not new:
            return
        for ref in new:  # an edited file may have changed its id: its old entry goes
            self.drop(ref.path, keep_sig=True)
        elsewhere = placed(self.hive, {r.id for r in new})
        for ref in sorted(new, key=lambda r: (r.mtime, r.path.name)):
            other = self._pending_by_id.get(ref.id) or elsewhere.get(ref.id)
            if other is not None and other != ref.path and os.path.lexists(other):
                where = self.hive.relative(other)
                self._pending_sig.pop(ref.path, None)
                self.reject(ref.path, f"duplicate task id {ref.id} (then in {where})")
                continue
            self._pending[ref.path] = ref
            self._pending_by_id[ref.id] = ref.path
            self._seq += 1
            self._pending_seq[ref.path] = self._seq
            bisect.insort(self._order, (ref.age_key(), self._seq, ref.path))

    def drop(self, path: Path, *, keep_sig: bool = False) -> None:
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
    def count(self) -> int:
        """Size of the pending set as of the last refresh."""
        return len(self._pending)

    def is_pending(self, ref: TaskRef) -> bool:
        """`ref` is (still) the pending set's entry for its file."""
        return self._pending.get(ref.path) is ref

    def in_order(self) -> Iterator[TaskRef]:
        """The pending set as of the last refresh, best first (priority, then age)."""
        live = self._pending_seq
        for _, seq, path in list(self._order):
            if live.get(path) == seq:
                yield self._pending[path]

    def is_claimable(self, ref: TaskRef, done: set[str] | None = None) -> bool:
        """Pending, every `depends_on` id is in done/, and no process has its file open
        for writing (the claim's rename would not stop the writer: what it wrote next
        would go into the claimed file, and be lost once the task is finished)."""
        if ref.state is not TaskState.PENDING:
            return False
        if ref.task.depends_on:
            done = done_ids(self.hive) if done is None else done
            if not all(dep in done for dep in ref.task.depends_on):
                return False
        if writer_open(ref.path):  # opened again since it was read: read again once closed
            self.drop(ref.path)
            self.settle_later(ref.path, time.time() + WRITER_RECHECK)
            return False
        return True
