"""Moving task files: claim, complete, fail, release, create.

Claiming is one atomic `rename` into tasks/active/<agent>/, so exactly one agent
wins; the board names every file it moves `<id>.md`. Nothing is deleted:
unreadable files go to tasks/rejected/. What is where is the board's `index`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from hivemind.clock import utcnow
from hivemind.errors import FileFormatError, UserError
from hivemind.fs.atomic import create_new_steps, rewrite_steps
from hivemind.fs.noreplace import move_into
from hivemind.fs.steps import Steps, run
from hivemind.hive.frontmatter import (
    MAX_FILE_BYTES,
    first_heading,
    read_task,
    render_task,
    task_from_text,
)
from hivemind.hive.layout import Hive
from hivemind.hive.models import Task, TaskState, check_file_id
from hivemind.hive.tasks import listing
from hivemind.hive.tasks.ending import held_text, publish_steps, retire, retire_finished
from hivemind.hive.tasks.file import ended_text
from hivemind.hive.tasks.index import TaskIndex
from hivemind.hive.tasks.ref import TaskRef, append_section, slugify
from hivemind.settings import AgentConfig

logger = logging.getLogger(__name__)

# The front matter fields the runtime sets when a task ends (the rest is the person's).
_DONE_FIELDS = ("status", "agent", "finished_at")
_FAIL_FIELDS = ("status", "agent", "attempts", "claimed_at", "finished_at")


class TaskBoard:
    """Reads and moves task files; safe to use from several processes at once.

    The board has an `index` (what is where, with its `pending` set) and answers
    the reading calls below with it; it moves the files itself.
    """

    def __init__(self, hive: Hive, settle_time: float = 0.05, *, fsync: bool = True) -> None:
        self.hive = hive
        self.fsync = fsync
        self.index = TaskIndex(hive, settle_time)
        self.pending = self.index.pending
        # Told of every move into or out of active/<agent>/ this board makes (a worker
        # process passes its moves on to the lead's board, see `moved_elsewhere`).
        self.on_load_change: Callable[[str, int], None] | None = None

    # -- reading: answered by the index and its pending set (see there) -----------
    @property
    def settle_time(self) -> float:
        return self.pending.settle_time

    @settle_time.setter
    def settle_time(self, seconds: float) -> None:
        self.pending.settle_time = seconds

    @property
    def unsettled(self) -> int:
        return self.pending.unsettled

    @property
    def settle_wait(self) -> float:
        return self.pending.settle_wait

    @property
    def pending_count(self) -> int:
        return self.pending.count

    def scan_pending(self, changed: Iterable[Path] | None = None) -> list[TaskRef]:
        return self.pending.scan(changed)

    def refresh_pending(self, changed: Iterable[Path] | None = None) -> None:
        self.pending.refresh(changed)

    def pending_in_order(self) -> Iterator[TaskRef]:
        return self.pending.in_order()

    def is_pending(self, ref: TaskRef) -> bool:
        return self.pending.is_pending(ref)

    def is_claimable(self, ref: TaskRef, done: set[str] | None = None) -> bool:
        return self.pending.is_claimable(ref, done)

    def active(self, agent: str) -> list[TaskRef]:
        return self.index.active(agent)

    def active_stats(self, agent: str) -> list[tuple[TaskRef, os.stat_result]]:
        return self.index.active_stats(agent)

    def active_agents(self) -> list[str]:
        return listing.active_agents(self.hive)

    def done_ids(self) -> set[str]:
        return listing.done_ids(self.hive)

    def load(self) -> dict[str, int]:
        return self.index.load()

    def counts(self) -> dict[TaskState, int]:
        return self.index.counts()

    def find(self, task_id: str) -> TaskRef | None:
        return self.index.find(task_id)

    def has_read(self, path: Path) -> bool:
        return self.index.has_read(path)

    def route(
        self, ref: TaskRef, agents: Sequence[AgentConfig], load: dict[str, int] | None = None
    ) -> str | None:
        return self.index.route(ref, agents, load)

    def claimable_for(self, agent_name: str, agents: Sequence[AgentConfig]) -> list[TaskRef]:
        return self.index.claimable_for(agent_name, agents)

    def moved_elsewhere(self, agent: str, delta: int) -> None:
        """Another board (another process) moved a task into or out of active/<agent>/."""
        self.index.moved(agent, delta)

    def _loaded(self, agent: str, delta: int) -> None:
        """This board moved a task into (+1) or out of (-1) active/<agent>/."""
        self.index.moved(agent, delta)
        if self.on_load_change is not None:
            self.on_load_change(agent, delta)

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
        deps = any(ref.task.depends_on for ref, _ in claims)
        done = listing.done_ids(self.hive) if deps else set()
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
        if not self.pending.is_claimable(ref, done):
            return None
        dest = self.hive.active_dir_for(agent) / f"{ref.id}.md"
        if os.path.lexists(dest):
            logger.warning("%s: already exists; not claiming %s", dest, ref.path)
            return None
        self.pending.drop(ref.path)
        if not self._rename(ref.path, dest):
            return None
        try:
            task = self.index.parsed.moved(ref.path, dest, os.lstat(dest)) or read_task(dest)
        except FileFormatError as exc:
            self.index.reject(dest, exc.reason)
            return None
        if task.id != ref.id:  # the name was reused by another file since the scan
            self.pending.moved_in(move_into(dest, self.hive.tasks_dir, ref.path.name))
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
        if ref.path in self.index.leaving:
            raise UserError(f"task {ref.id} is done already (in {self.hive.done_dir.name}/)")
        if ref.path.parent != self.hive.active_dir_for(agent):
            where = self.hive.relative(ref.path.parent)
            raise UserError(f"task {ref.id} is not claimed by {agent} (it is in {where}/)")
        try:
            # Parsed already when it was claimed or perceived, unless it changed since.
            return self.index.parsed.load(ref.path, os.lstat(ref.path), task_from_text)
        except FileNotFoundError:
            now = self.index.find(ref.id)
            where = self.hive.relative(now.path) if now else "nowhere on the board"
            raise UserError(
                f"task {ref.id} is no longer claimed by {agent} (now: {where})"
            ) from None

    def _taken(self, ref: TaskRef, agent: str, ending: str) -> UserError:
        """The error for an ending that lost the race with a person's cancel or
        reassign: the task stays where they put it."""
        self.index.parsed.forget(ref.path)
        self._loaded(agent, -1)
        return UserError(
            f"task {ref.id} was taken from {agent} (cancelled or reassigned by a person) "
            f"while it was being {ending}: not {ending}"
        )

    def complete(self, ref: TaskRef, result: str, agent: str) -> TaskRef:
        """Append `## Result`, mark done and move the task to done/."""
        return run(self.complete_steps(ref, result, agent))

    def complete_steps(self, ref: TaskRef, result: str, agent: str) -> Steps[TaskRef]:
        """`complete` as a durable operation (see `steps.run_async`).

        The finished version is written under a temp name beside the claimed copy,
        flushed and linked into done/ as `<id>.md` (never replacing a file); then the
        claimed copy is removed (`ending.retire`). A crash between the two leaves both:
        `retire_finished` removes the claimed copy at the next start.
        """
        text, task = held_text(self.index, ref, self._owned(ref, agent))
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
        dest = yield from publish_steps(
            task.id, text, ref.path.parent, self.hive.done_dir, fsync=self.fsync
        )
        if not retire(self.index, ref.path):
            os.unlink(dest)  # the claim ended first: the task is where it was taken
            raise self._taken(ref, agent, "completed")
        self.index.parsed.forget(ref.path)
        self._loaded(agent, -1)
        return TaskRef(task, dest, TaskState.DONE, agent, time.time())

    def retire_finished(self, agent: str) -> list[str]:
        """Remove the claimed copies a crash left behind (see `ending.retire_finished`)."""
        return retire_finished(self.index, agent)

    def release(self, ref: TaskRef, agent: str) -> TaskRef:
        """Give a task `agent` holds back to tasks/, as it is, for any agent to claim (its
        agent cannot work on it for now). Not an attempt: nothing is written into it."""
        task = self._owned(ref, agent)
        dest = move_into(ref.path, self.hive.tasks_dir, ref.path.name)
        self.index.parsed.forget(ref.path)
        self._loaded(agent, -1)
        self.pending.moved_in(dest)
        task = task.model_copy(
            update={"status": TaskState.PENDING, "agent": None, "claimed_at": None}
        )
        return TaskRef(task, dest, TaskState.PENDING, None, time.time())

    def release_all(self, agent: str) -> list[str]:
        """Give back to tasks/ every task `agent` holds, for other agents to take (it has
        left the hive: no agents/<agent>/ROM.md); their ids. Copies whose finished
        versions are in done/ are removed instead (`retire_finished`), and the empty
        folder goes too."""
        retire_finished(self.index, agent)
        released = []
        for ref in self.index.active(agent):
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
        text, task = held_text(self.index, ref, self._owned(ref, agent))
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
        if not (yield from rewrite_steps(ref.path, text, fsync=self.fsync)):
            raise self._taken(ref, agent, "failed")  # a person moved it away first
        try:
            dest = move_into(ref.path, folder, f"{task.id}.md")
        except FileNotFoundError:
            raise self._taken(ref, agent, "failed") from None
        self.index.parsed.forget(ref.path)
        self._loaded(agent, -1)
        if retry:
            self.pending.moved_in(dest)
        return TaskRef(task, dest, state, None if retry else agent, time.time())

    def create(self, task: Task, created_by: str | None = None) -> TaskRef:
        """Write tasks/<id>.md whole; a task id already on the board is refused."""
        return run(self.create_steps(task, created_by))

    def create_steps(self, task: Task, created_by: str | None = None) -> Steps[TaskRef]:
        """`create` as a durable operation (see `steps.run_async`)."""
        existing = self.index.where(task.id)
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
        self.pending.moved_in(path, task.id)
        return TaskRef(task, path, TaskState.PENDING, None, time.time())

    def new_task_id(self, title: str) -> str:
        """An id made from the title (`fix-the-login-bug`), unique on the board."""
        base = slugify(title)
        candidate, n = base, 1
        while self.index.where(candidate) is not None:
            n += 1
            candidate = f"{base}-{n}"
        return candidate
