"""The task board: tasks/ (pending), active/<agent>/, done/, failed/, rejected/.

A task's state is the folder it is in. Claiming is one atomic `rename` into
tasks/active/<agent>/, so exactly one agent wins; the board names every file it
moves `<id>.md`. Nothing is deleted: unreadable files go to tasks/rejected/.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from hivemind.clock import utcnow
from hivemind.errors import FileFormatError, UserError
from hivemind.fs.atomic import atomic_write_steps, create_new_steps, write_temp
from hivemind.fs.noreplace import link_new, move_into, move_unique
from hivemind.fs.statcache import sig_of
from hivemind.fs.steps import Steps, run
from hivemind.hive.frontmatter import (
    MAX_FILE_BYTES,
    first_heading,
    read_task,
    read_text,
    render_task,
    task_from_text,
)
from hivemind.hive.layout import Hive
from hivemind.hive.models import Task, TaskState, check_file_id
from hivemind.hive.tasks.file import ended_text
from hivemind.hive.tasks.index import TaskIndex
from hivemind.hive.tasks.listing import md_files
from hivemind.hive.tasks.ref import TaskRef, append_section, as_utc, slugify

logger = logging.getLogger(__name__)

# The front matter fields the runtime sets when a task ends (the rest is the person's).
_DONE_FIELDS = ("status", "agent", "finished_at")
_FAIL_FIELDS = ("status", "agent", "attempts", "claimed_at", "finished_at")


class TaskBoard(TaskIndex):
    """Reads and moves task files; safe to use from several processes at once."""

    def __init__(self, hive: Hive, settle_time: float = 0.05, *, fsync: bool = True) -> None:
        super().__init__(hive, settle_time, fsync=fsync)

    # -- moving ------------------------------------------------------------------
    def claim(self, ref: TaskRef, agent: str) -> TaskRef | None:
        """Move the task into active/<agent>/; None if another agent won or deps are not done."""
        return self.claim_many([(ref, agent)])[0]

    def claim_many(self, claims: Sequence[tuple[TaskRef, str]]) -> list[TaskRef | None]:
        """Claim several tasks (one look at done/ for their dependencies).

        A claim is the rename alone: the file is not rewritten (the folder says who
        holds it), so it costs no flush to disk. A claim lost to a power cut leaves the
        task pending, to be claimed again; anything the agent then makes durable (a
        message, a result) commits the rename with it.
        """
        done = self.done_ids() if any(ref.task.depends_on for ref, _ in claims) else set()
        out: list[TaskRef | None] = []
        for ref, agent in claims:
            got = self._take(ref, agent, done)
            if got is None:
                out.append(None)
                continue
            dest, task = got
            self._loaded(agent, +1)
            out.append(TaskRef(task, dest, TaskState.ACTIVE, agent, time.time()))
        return out

    def _take(self, ref: TaskRef, agent: str, done: set[str]) -> tuple[Path, Task] | None:
        """The claim itself (the rename), and the task as it is now, marked active."""
        try:
            check_file_id(agent)
        except ValueError as exc:
            raise UserError(f"agent name: {exc}") from None
        if not self.is_claimable(ref, done):
            return None
        dest = self.hive.active_dir_for(agent) / f"{ref.id}.md"
        if os.path.lexists(dest):
            logger.warning("%s: already exists; not claiming %s", dest, ref.path)
            return None
        self._drop_pending(ref.path)
        if not self._rename(ref.path, dest):
            return None
        try:
            task = self._parsed.moved(ref.path, dest, os.lstat(dest)) or read_task(dest)
        except FileFormatError as exc:
            self._reject(dest, exc.reason)
            return None
        if task.id != ref.id:  # the name was reused by another file since the scan
            self._moved_in.add(move_into(dest, self.hive.tasks_dir, ref.path.name))
            return None
        update = {"status": TaskState.ACTIVE, "agent": agent, "claimed_at": utcnow()}
        return dest, task.model_copy(update=update)

    @staticmethod
    def _rename(src: Path, dest: Path) -> bool:
        """The claim: of all processes renaming `src`, exactly one gets True."""
        for _ in range(2):
            try:
                os.rename(src, dest)
                return True
            except FileNotFoundError:
                if dest.parent.is_dir():
                    return False  # src is gone: another agent won
                dest.parent.mkdir(parents=True, exist_ok=True)
        return False

    def check_held(self, ref: TaskRef, agent: str) -> Task:
        """The task of `ref` as its file reads now; UserError (saying where the task is
        now) unless `agent` still holds it: its claimed copy is where the claim put it."""
        return self._owned(ref, agent)

    def _owned(self, ref: TaskRef, agent: str) -> Task:
        if ref.path in self._leaving:
            raise UserError(f"task {ref.id} is done already (in {self.hive.done_dir.name}/)")
        if ref.path.parent != self.hive.active_dir_for(agent):
            where = self.hive.relative(ref.path.parent)
            raise UserError(f"task {ref.id} is not claimed by {agent} (it is in {where}/)")
        try:
            # Parsed already when it was claimed or perceived, unless it changed since.
            return self._parsed.load(ref.path, os.lstat(ref.path), task_from_text)
        except FileNotFoundError:
            now = self.find(ref.id)
            where = self.hive.relative(now.path) if now else "nowhere on the board"
            raise UserError(
                f"task {ref.id} is no longer claimed by {agent} (now: {where})"
            ) from None

    def complete(self, ref: TaskRef, result: str, agent: str) -> TaskRef:
        """Append `## Result`, mark done and move the task to done/."""
        return run(self.complete_steps(ref, result, agent))

    def complete_steps(self, ref: TaskRef, result: str, agent: str) -> Steps[TaskRef]:
        """`complete` as a durable operation (see `steps.run_async`).

        The finished version is written under a temp name beside the claimed copy,
        flushed and linked into done/ as `<id>.md` (never replacing a file); then the
        claimed copy is removed (`_retire`). A crash between the two leaves both:
        `retire_finished` removes the claimed copy at the next start.
        """
        text, task = self._owned_text(ref, agent)
        # A task done before and dropped back into tasks/ by a person is done again:
        # its new result is appended after the old one (and the person's notes).
        task = task.model_copy(
            update={
                "status": TaskState.DONE,
                "agent": agent,
                "finished_at": utcnow(),
                "body": append_section(task.body, "Result", result),
            }
        )
        text = ended_text(text, ref.path, task, _DONE_FIELDS, "Result", result)
        dest = yield from self._publish(task.id, text, ref.path.parent, self.hive.done_dir)
        self._retire(ref.path)
        self._parsed.forget(ref.path)
        self._loaded(agent, -1)
        return TaskRef(task, dest, TaskState.DONE, agent, time.time())

    def _owned_text(self, ref: TaskRef, agent: str) -> tuple[str, Task]:
        """The held task's file as it stands (its text and the task it reads as)."""
        task = self._owned(ref, agent)
        try:
            before = os.lstat(ref.path)
            text = read_text(ref.path)
            if sig_of(os.lstat(ref.path)) == sig_of(before):  # the version parsed before
                return text, self._parsed.load(ref.path, before, task_from_text)
            return text, task_from_text(text, ref.path)  # changed as it was read
        except (OSError, FileFormatError) as exc:
            # Changed again since `_owned` read it: that version ends, rendered whole.
            logger.warning("%s: %s; the task ends as it was read before", ref.path, exc)
            return render_task(task), task

    def _publish(self, task_id: str, text: str, beside: Path, folder: Path) -> Steps[Path]:
        """Write `text` into `folder` as `<task_id>.md` (or `-1.md`, ... if that name is
        taken), whole: under a temp name in `beside` first (a small folder: creating a
        file in a done/ of thousands took three times as long here), flushed, then
        linked in without replacing."""
        name, data = f"{task_id}.md", text.encode("utf-8")
        tmp = write_temp(beside, name, data, fsync=False)
        try:
            if self.fsync:
                yield [tmp]
            dest = folder / name
            try:
                linked = link_new(tmp, dest)
            except FileNotFoundError:
                if folder.is_dir():
                    raise
                folder.mkdir(parents=True, exist_ok=True)  # made on first use
                linked = link_new(tmp, dest)
            if not linked:
                dest = move_unique(tmp, folder, name)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return dest

    def _retire(self, path: Path) -> None:
        """Remove the claimed copy of a task whose finished version is in done/.

        Removed here and now: a background thread for it (freeing a file is the slowest
        step of a completion on ext4) cost the event loop more in turns for the
        interpreter lock than the removal itself (measured). A copy that cannot be
        removed is listed nowhere by this board, and `retire_finished` tries again at
        the next start.
        """
        if not _remove(path):
            self._leaving.add(path)

    def retire_finished(self, agent: str) -> list[str]:
        """Remove claimed copies of `agent`'s tasks that a crash left behind although
        their finished versions reached done/ (see `complete_steps`); their ids.

        A finished version is this copy's when it has the same id and text (plus the
        result), was finished by `agent`, and after the copy was claimed (its ctime):
        an earlier task of the same id done before is not mistaken for it.
        """
        gone = []
        for path, st in md_files(self.hive.active_dir_for(agent)):
            twins = list(self._done_versions(path.name))
            if not twins or not stat.S_ISREG(st.st_mode):
                continue  # the common case at a start: nothing in done/ by that name
            try:
                claimed = read_task(path)
            except (OSError, FileFormatError):
                continue
            twin = next((t for t in twins if _finishes(t, claimed, agent, st.st_ctime)), None)
            if twin is None:
                continue
            logger.info("%s: removed; its finished version is %s (a stop came between "
                        "the two steps)", path, self.hive.relative(twin))
            if _remove(path):
                self._parsed.forget(path)
                gone.append(claimed.id)
        if gone:
            self._load = None  # listed afresh
        return gone

    def _done_versions(self, name: str) -> Iterator[Path]:
        """done/<name> and the `<stem>-1.md`, ... names a taken name moves on to."""
        stem = name[:-3]
        for n in range(10_000):
            path = self.hive.done_dir / (name if n == 0 else f"{stem}-{n}.md")
            if not os.path.lexists(path):
                return
            yield path

    def release(self, ref: TaskRef, agent: str) -> TaskRef:
        """Give a task `agent` holds back to tasks/, as it is, for any agent to claim (its
        agent cannot work on it for now). Not an attempt: nothing is written into it."""
        task = self._owned(ref, agent)
        dest = move_into(ref.path, self.hive.tasks_dir, ref.path.name)
        self._parsed.forget(ref.path)
        self._loaded(agent, -1)
        self._moved_in.add(dest)
        task = task.model_copy(
            update={"status": TaskState.PENDING, "agent": None, "claimed_at": None}
        )
        return TaskRef(task, dest, TaskState.PENDING, None, time.time())

    def release_all(self, agent: str) -> list[str]:
        """Give back to tasks/ every task `agent` holds, for other agents to take (it has
        left the hive: no agents/<agent>/ROM.md); their ids. Copies whose finished
        versions are in done/ are removed instead (`retire_finished`), and the empty
        folder goes too."""
        self.retire_finished(agent)
        released = []
        for ref in self.active(agent):
            try:
                self.release(ref, agent)
            except (UserError, OSError) as exc:  # moved meanwhile: nothing to give back
                logger.warning("%s: not given back to tasks/: %s", ref.path, exc)
                continue
            released.append(ref.id)
        with contextlib.suppress(OSError):  # not empty (a file that is no task): kept
            self.hive.active_dir_for(agent).rmdir()
        return released

    def fail(self, ref: TaskRef, reason: str, agent: str, *, final: bool = False) -> TaskRef:
        """Count the attempt; back to tasks/ while attempts < max_attempts, else failed/.

        `final=True` sends it to failed/ at once (e.g. its token budget is spent).
        """
        return run(self.fail_steps(ref, reason, agent, final=final))

    def fail_steps(
        self, ref: TaskRef, reason: str, agent: str, *, final: bool = False
    ) -> Steps[TaskRef]:
        """`fail` as a durable operation (see `steps.run_async`)."""
        text, task = self._owned_text(ref, agent)
        attempts = task.attempts + 1
        body = append_section(task.body, f"Attempt {attempts} failed", reason)
        retry = attempts < task.max_attempts and not final
        update: dict[str, object] = {"attempts": attempts, "body": body}
        if retry:
            update.update(status=TaskState.PENDING, agent=None, claimed_at=None)
            state, folder = TaskState.PENDING, self.hive.tasks_dir
        else:
            update.update(status=TaskState.FAILED, agent=agent, finished_at=utcnow())
            state, folder = TaskState.FAILED, self.hive.failed_dir
        task = task.model_copy(update=update)
        text = ended_text(text, ref.path, task, _FAIL_FIELDS, f"Attempt {attempts} failed", reason)
        yield from atomic_write_steps(ref.path, text, fsync=self.fsync)
        dest = move_into(ref.path, folder, f"{task.id}.md")
        self._parsed.forget(ref.path)
        self._loaded(agent, -1)
        if retry:
            self._moved_in.add(dest)
        return TaskRef(task, dest, state, None if retry else agent, time.time())

    def create(self, task: Task, created_by: str | None = None) -> TaskRef:
        """Write tasks/<id>.md whole; a task id already on the board is refused."""
        return run(self.create_steps(task, created_by))

    def create_steps(self, task: Task, created_by: str | None = None) -> Steps[TaskRef]:
        """`create` as a durable operation (see `steps.run_async`)."""
        existing = self._where(task.id)
        if existing is not None:
            raise UserError(
                f"duplicate task id {task.id} (already in {self.hive.relative(existing)})"
            )
        task = task.model_copy(
            update={
                "title": task.title or first_heading(task.body) or task.id,
                # The file ends with a newline of its own (`render`), not a blank line.
                "body": task.body.removesuffix("\n"),
                "status": TaskState.PENDING,
                "agent": None,
                "created_by": created_by or task.created_by,
                "created_at": task.created_at or utcnow(),
            }
        )
        text = render_task(task)
        if (size := len(text.encode("utf-8"))) > MAX_FILE_BYTES:
            # It would be written, then rejected by every reader: refused here instead.
            raise UserError(
                f"task {task.id} would be a file of {size:,} bytes; the limit is "
                f"{MAX_FILE_BYTES:,} (1 MB): put the long part in a file of workspace/ "
                "and name that file in the task"
            )
        self.hive.tasks_dir.mkdir(parents=True, exist_ok=True)
        path = self.hive.tasks_dir / f"{task.id}.md"
        if not (yield from create_new_steps(path, text, fsync=self.fsync)):
            raise UserError(f"duplicate task id {task.id} (already in {self.hive.relative(path)})")
        self._pending_ids[path.name] = task.id
        self._moved_in.add(path)
        return TaskRef(task, path, TaskState.PENDING, None, time.time())

    def new_task_id(self, title: str) -> str:
        """An id made from the title (`fix-the-login-bug`), unique on the board."""
        base = slugify(title)
        candidate, n = base, 1
        while self._where(candidate) is not None:
            n += 1
            candidate = f"{base}-{n}"
        return candidate


def _finishes(path: Path, claimed: Task, agent: str, claimed_at: float) -> bool:
    """True if the task file at `path` is `claimed` finished by `agent` after `claimed_at`."""
    try:
        finished = read_task(path)
    except (OSError, FileFormatError):
        return False
    return (
        finished.id == claimed.id
        and finished.status is TaskState.DONE
        and finished.agent == agent
        and finished.finished_at is not None
        and as_utc(finished.finished_at).timestamp() >= claimed_at
        and finished.body.startswith(claimed.body.rstrip("\n"))
    )


def _remove(path: Path) -> bool:
    """Unlink `path`; False (logged) if it is still there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("%s: could not be removed: %s", path, exc)
        return False
    return True
