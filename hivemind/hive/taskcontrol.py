"""What people do to one task by hand: find it anywhere on the board, cancel it, give it
to another agent.

Every change moves the file (never deletes it) and adds a section to its body, so the
task keeps its history. A file is first taken out of an agent's or the dispatcher's
reach with one rename (as a claim is): whoever renames first wins, so a task is never
both finished by its agent and changed here. An agent told of the change by mail finds
its task gone; a tool call on it is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivemind.clock import utcnow
from hivemind.errors import FileFormatError, UnknownAgentError, UserError
from hivemind.fs.atomic import atomic_write
from hivemind.fs.noreplace import link_new, move_unique
from hivemind.hive.document import read_text
from hivemind.hive.frontmatter import render_task, task_from_text
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.leftovers import parked_name
from hivemind.hive.links import task_file_problem
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.models import Task, TaskState, check_file_id
from hivemind.hive.quarantine import REASON_SUFFIX, read_reason
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.file import ended_text
from hivemind.hive.tasks.listing import md_files
from hivemind.hive.tasks.ref import append_section

CANCELLED = "cancelled by human"
"""The reason a cancelled task carries (a person's own words follow it)."""

_MOVABLE = (TaskState.PENDING, TaskState.ACTIVE)


@dataclass(frozen=True)
class Located:
    """Where a task is now: its state, its file, who holds it (active), and the task as
    it reads (None when it cannot be read: `problem` says why)."""

    task_id: str
    state: TaskState
    path: Path
    holder: str | None = None
    task: Task | None = None
    problem: str | None = None
    text: str = ""  # the file as it was read ("" if it was not)


@dataclass(frozen=True)
class Changed:
    """The outcome of a change: where the task went, and the agent that held it (told)."""

    task_id: str
    path: Path
    holder: str | None


def locate(hive: Hive, task_id: str) -> Located:
    """The task of this id in any state; UserError naming the id if there is none."""
    try:
        check_file_id(task_id)
    except ValueError as exc:
        raise UserError(f"no task {task_id!r}: {exc}") from None
    ref = TaskBoard(hive).find(task_id)
    if ref is not None:
        task, problem, text = _read(hive, ref.path)
        return Located(task_id, ref.state, ref.path, ref.agent, task, problem, text)
    rejected = hive.rejected_dir / f"{task_id}.md"
    if os.path.lexists(rejected):
        task, _, text = _read(hive, rejected)
        reason = read_reason(rejected) or f"(no {rejected.name}{REASON_SUFFIX} file)"
        return Located(task_id, TaskState.REJECTED, rejected, None, task, reason, text)
    raise UserError(
        f"no task {task_id!r} in {hive.root} (looked in tasks/, active/, done/, failed/ and "
        "rejected/; `hivemind task list --all` lists them)"
    )


def _read(hive: Hive, path: Path) -> tuple[Task | None, str | None, str]:
    """The task in `path`, or why it is not read (a link is never read through), and
    the file's text."""
    text = ""
    try:
        if (problem := task_file_problem(hive, os.lstat(path))) is not None:
            return None, problem, ""
        text = read_text(path)
        return task_from_text(text, path), None, text
    except FileFormatError as exc:
        return None, exc.reason, text
    except OSError as exc:
        return None, f"cannot read the file: {exc.strerror}", ""


def _movable(hive: Hive, found: Located, doing: str) -> Task:
    """The task of `found` if it is pending or active and readable, else one line why not."""
    if found.state not in _MOVABLE:
        raise UserError(
            f"task {found.task_id} is {found.state.value} (in {hive.relative(found.path)}); "
            f"only a pending or active task can be {doing}"
        )
    if found.task is None:
        raise UserError(f"task {found.task_id} cannot be {doing}: "
                        f"{hive.relative(found.path)}: {found.problem}")
    return found.task


def _take(hive: Hive, found: Located, to: Path) -> None:
    """Rename the task's file to `to`, out of everyone else's reach; one line if it was
    moved meanwhile (claimed, finished)."""
    try:
        os.rename(found.path, to)
    except FileNotFoundError:
        try:
            now = hive.relative(locate(hive, found.task_id).path)
        except UserError:
            now = "nowhere on the board"
        raise UserError(
            f"task {found.task_id} moved while it was being changed (now: {now}); try again"
        ) from None


def cancel(hive: Hive, task_id: str, note: str = "") -> Changed:
    """Move a pending or active task to tasks/failed/ with the reason "cancelled by
    human" (and `note`); the agent holding it is told by mail."""
    found = locate(hive, task_id)
    task = _movable(hive, found, "cancelled")
    reason = f"{CANCELLED}: {note.strip()}" if note.strip() else CANCELLED
    hive.failed_dir.mkdir(parents=True, exist_ok=True)
    dest = hive.failed_dir / f"{task.id}.md"
    parked = _parked(hive.failed_dir, found.path)
    _take(hive, found, parked)
    with _put_back_on_error(parked, found.path):
        text, task = _text(hive, parked, found.path, task)
        update = {"status": TaskState.FAILED, "agent": found.holder or task.agent,
                  "finished_at": utcnow()}
        atomic_write(parked, _with_section(text, parked, task, update, "Cancelled", reason))
        dest = _place(parked, dest)
    if found.holder is not None:
        _tell(hive, found.holder, task, f"[cancelled] {task.title or task.id}",
              f"Task {task.id} was cancelled by {HUMAN} and moved to tasks/failed/"
              + (f" ({note.strip()})" if note.strip() else "")
              + ". It is no longer yours: stop working on it (complete_task and fail_task "
              "on it are refused).")
    return Changed(task.id, dest, found.holder)


def reassign(hive: Hive, task_id: str, agent: str) -> Changed:
    """Give a pending or active task to `agent`: its `assignee` is set and, if another
    agent held it, it goes back to tasks/ (that agent is told by mail)."""
    names = hive.agent_names()
    if agent not in names:
        raise UnknownAgentError(
            f"unknown agent {agent!r} (agents: {', '.join(names) or 'none yet'})"
        )
    found = locate(hive, task_id)
    task = _movable(hive, found, "reassigned")
    if found.holder == agent:
        raise UserError(f"{agent} holds task {task.id} already")
    if found.holder is None and task.assignee == agent:
        raise UserError(f"task {task.id} is assigned to {agent} already")
    parked = _parked(hive.tasks_dir, found.path)
    _take(hive, found, parked)
    with _put_back_on_error(parked, found.path):
        text, task = _text(hive, parked, found.path, task)
        was = found.holder or task.assignee
        update: dict[str, Any] = {"assignee": agent}
        if found.holder is not None:  # back to tasks/, as a released task is
            update.update(status=TaskState.PENDING, agent=None, claimed_at=None)
        section = f"given to {agent} by {HUMAN}" + (f" (was: {was})" if was else "")
        atomic_write(parked, _with_section(text, parked, task, update, "Reassigned", section))
        dest = _place(parked, hive.tasks_dir / found.path.name)
    if found.holder is not None:
        _tell(hive, found.holder, task, f"[reassigned] {task.title or task.id}",
              f"Task {task.id} was given to {agent} by {HUMAN}. It is no longer yours: stop "
              "working on it (complete_task and fail_task on it are refused).")
    return Changed(task.id, dest, found.holder)


def dependents(hive: Hive, task_id: str) -> list[str]:
    """Ids of the pending tasks that wait for `task_id` (its `depends_on` names it)."""
    found = []
    for path, _ in md_files(hive.tasks_dir):
        task, _problem, _ = _read(hive, path)
        if task is not None and task_id in task.depends_on:
            found.append(task.id)
    return sorted(found)


def _parked(folder: Path, path: Path) -> Path:
    return folder / parked_name(path.name, os.getpid())


def _text(hive: Hive, parked: Path, home: Path, task: Task) -> tuple[str, Task]:
    """The file's text and task as they are now, taken out of reach (an edit made since
    it was located is kept; read as the file of `home`); as it was located if it no
    longer reads."""
    try:
        if task_file_problem(hive, os.lstat(parked)) is None:
            text = read_text(parked)
            return text, task_from_text(text, home)
    except (OSError, FileFormatError):
        pass
    return render_task(task), task


@contextmanager
def _put_back_on_error(parked: Path, home: Path) -> Iterator[None]:
    """A change that fails half-way (a full disk) leaves the file where it was."""
    try:
        yield
    except BaseException:
        if os.path.lexists(parked):
            with suppress(OSError):
                move_unique(parked, home.parent, home.name)
        raise


def _with_section(
    text: str, path: Path, task: Task, update: dict[str, Any], heading: str, section: str
) -> str:
    """`text` with the runtime's fields of `update` set and `## heading` appended; every
    other line as the person wrote it."""
    body = append_section(task.body, heading, section)
    changed = task.model_copy(update={**update, "body": body})
    return ended_text(text, path, changed, tuple(update), heading, section)


def _place(parked: Path, dest: Path) -> Path:
    """Put the rewritten file at `dest` (never replacing one: else `<stem>-1.md`, ...)."""
    return dest if link_new(parked, dest) else move_unique(parked, dest.parent, dest.name)


def _tell(hive: Hive, agent: str, task: Task, subject: str, body: str) -> None:
    """Mail the agent that held the task (it stops at its next cycle)."""
    if hive.is_agent(agent):
        PostOffice(hive).send(HUMAN, [agent], subject, body, task=task.id)
