"""What people steer a running hive with: pause or resume an agent, retry a task.

A pause is kept in `.hivemind/pauses/<agent>.json` (a hive's ROMs are often
committed, so not in the ROM), survives a restart, and is read by the daemon while
it runs. Resuming rewrites the file (`paused: false`) rather than removing it: its
new version tells the daemon to lift a pause of its own too (an API that refused
the agent's key or model).

Retrying moves a task from tasks/failed/ or tasks/rejected/ back to tasks/. A failed
one keeps its history (each `## Attempt N failed` section) and gets a `## Retried`
one; its attempts start again. A rejected file is read again first, as the board
would read it, and stays rejected, with its reason, until it is fixed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from hivemind.clock import utcnow
from hivemind.errors import FileFormatError, UnknownAgentError, UserError
from hivemind.fs.atomic import atomic_write
from hivemind.fs.filenames import is_utf8, not_utf8_reason
from hivemind.fs.noreplace import move_into
from hivemind.hive.frontmatter import read_text, task_from_text
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.models import Task, TaskState
from hivemind.hive.quarantine import REASON_SUFFIX, read_reason
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.file import ended_text
from hivemind.hive.tasks.ref import append_section

PAUSES = "pauses"
"""The folder of `.hivemind/` that keeps the pauses people made."""

_PAUSE_BYTES = 4096
# The fields a retry resets: the runtime's, as a failure wrote them.
_RETRY_FIELDS = ("status", "agent", "attempts", "claimed_at", "finished_at", "retried_at")


class PauseRecord(BaseModel):
    """`.hivemind/pauses/<agent>.json`: whether a person paused the agent, and when."""

    model_config = ConfigDict(extra="ignore")

    agent: str
    paused: bool
    at: datetime
    by: str = HUMAN


def pauses_dir(hive: Hive) -> Path:
    return hive.state_dir / PAUSES


def pause_path(hive: Hive, agent: str) -> Path:
    return pauses_dir(hive) / f"{agent}.json"


def read_pause(path: Path) -> PauseRecord | None:
    """The record at `path`; None if there is none or it cannot be read (never through
    a link: `.hivemind/` of a cloned hive may hold anything)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        try:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            data = fh.read(_PAUSE_BYTES)
        except OSError:
            return None
    try:
        return PauseRecord.model_validate_json(data)
    except ValidationError:
        return None


def pause_records(hive: Hive) -> dict[str, PauseRecord]:
    """Every agent's pause record (paused or resumed), by agent."""
    out: dict[str, PauseRecord] = {}
    try:
        entries = list(os.scandir(pauses_dir(hive)))
    except OSError:
        return out
    for entry in entries:
        if not entry.name.endswith(".json") or entry.name.startswith("."):
            continue
        record = read_pause(Path(entry.path))
        if record is not None and record.agent == entry.name[:-5]:
            out[record.agent] = record
    return out


def paused_agents(hive: Hive) -> dict[str, PauseRecord]:
    """The agents a person paused now, each with its record."""
    return {name: r for name, r in pause_records(hive).items() if r.paused}


def pauses_version(hive: Hive) -> tuple[int, int] | None:
    """A cheap version of the pauses (the folder's mtime and size: a pause or a resume
    renames a file into it); None while there is no such folder."""
    try:
        st = os.stat(pauses_dir(hive))
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _check_agent(hive: Hive, agent: str) -> None:
    if not hive.is_agent(agent):
        names = hive.agent_names()
        raise UnknownAgentError(
            f"unknown agent {agent!r} (agents: {', '.join(names) or 'none yet'})"
        )


def _set_pause(hive: Hive, agent: str, paused: bool, by: str) -> PauseRecord:
    record = PauseRecord(agent=agent, paused=paused, at=utcnow(), by=by)
    folder = pauses_dir(hive)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(pause_path(hive, agent), record.model_dump_json() + "\n")
    return record


def pause(hive: Hive, agent: str, by: str = HUMAN) -> PauseRecord:
    """Pause `agent`: it takes no task and no mail, and the tasks it holds go back to
    tasks/ once its cycle in flight ends. UserError if it is unknown or paused already."""
    _check_agent(hive, agent)
    now = read_pause(pause_path(hive, agent))
    if now is not None and now.paused:
        raise UserError(f"{agent} is paused already (since {now.at:%Y-%m-%d %H:%M} UTC, "
                        f"by {now.by}); `hivemind resume {agent}` resumes it")
    return _set_pause(hive, agent, True, by)


def resume(hive: Hive, agent: str, by: str = HUMAN) -> PauseRecord | None:
    """Lift a person's pause of `agent`, and tell the daemon to lift its own (after the
    model API refused the agent). The pause lifted, or None if there was none here."""
    _check_agent(hive, agent)
    before = read_pause(pause_path(hive, agent))
    _set_pause(hive, agent, False, by)
    return before if before is not None and before.paused else None


# -- retry -------------------------------------------------------------------------


@dataclass
class Retried:
    """A task back in tasks/: where it is now, and the state it came from."""

    id: str
    path: Path
    was: TaskState
    attempts_before: int = 0


class StillRejected(UserError):
    """A rejected file read again is still not a task it can be."""


def retry(hive: Hive, task_id: str, by: str = HUMAN) -> Retried:
    """Move the failed or rejected task `task_id` back to tasks/ (see the module's
    docstring). UserError if there is no such task, or it is in another state."""
    board = TaskBoard(hive, fsync=True)
    ref = board.find(task_id)
    if ref is not None and ref.state is TaskState.FAILED:
        return _retry_failed(hive, ref.path, ref.task, by)
    rejected = _rejected_file(hive, task_id)
    if rejected is not None:
        return _retry_rejected(hive, board, rejected, by)
    if ref is not None:
        where = hive.relative(ref.path)
        raise UserError(f"task {task_id} is {ref.state.value} ({where}); only a failed or "
                        "rejected task can be retried")
    raise UserError(f"no task {task_id!r} on the board (`hivemind task list --all` "
                    "lists them)")


def _retried_text(text: str, path: Path, task: Task, note: str) -> str:
    """The file's text with the runtime's fields as for a new task, and `## Retried`."""
    fresh = task.model_copy(update={"status": TaskState.PENDING, "agent": None, "attempts": 0,
                                    "claimed_at": None, "finished_at": None,
                                    "retried_at": utcnow(),
                                    "body": append_section(task.body, "Retried", note)})
    return ended_text(text, path, fresh, _RETRY_FIELDS, "Retried", note)


def _retry_failed(hive: Hive, path: Path, task: Task, by: str) -> Retried:
    try:
        text = read_text(path)
        task = task_from_text(text, path)
    except (OSError, FileFormatError) as exc:
        raise UserError(f"{hive.relative(path)}: cannot be read again: {exc}") from None
    when = utcnow().strftime("%Y-%m-%d %H:%M UTC")
    note = (f"By {by} at {when}, after {task.attempts} attempt(s): its attempts start "
            "again.")
    atomic_write(path, _retried_text(text, path, task, note))
    dest = move_into(path, hive.tasks_dir, f"{task.id}.md")
    return Retried(task.id, dest, TaskState.FAILED, task.attempts)


def _rejected_file(hive: Hive, name: str) -> Path | None:
    """tasks/rejected/<name>.md (or <name> as given), if it is there."""
    for candidate in (f"{name}.md", name):
        if "/" in candidate or candidate.endswith(REASON_SUFFIX) or candidate.startswith("."):
            continue
        path = hive.rejected_dir / candidate
        if os.path.lexists(path):
            return path
    return None


def _problem(hive: Hive, board: TaskBoard, path: Path) -> tuple[str, str, Task | None]:
    """What keeps the rejected file at `path` from being a task now ("" if nothing),
    with its text and its task; read as the board would, never through a link."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a link is not read)", "", None
    if st.st_nlink > 1:
        return f"the file has {st.st_nlink} hard links (not read)", "", None
    if not is_utf8(path.name):
        return not_utf8_reason(path.name), "", None
    if not path.name.endswith(".md"):
        return "not a task file: its name must end in .md", "", None
    try:
        text = read_text(path)
        task = task_from_text(text, path)
    except FileFormatError as exc:
        return exc.reason, "", None
    except OSError as exc:
        return str(exc.strerror), "", None
    other = board.find(task.id)
    if other is not None:
        return (f"duplicate task id {task.id} (already in {hive.relative(other.path)})",
                text, task)
    return "", text, task


def _retry_rejected(hive: Hive, board: TaskBoard, path: Path, by: str) -> Retried:
    reason_before = read_reason(path)
    problem, text, task = _problem(hive, board, path)
    rel = hive.relative(path)
    if problem or task is None:
        line = " ".join(problem.split())
        if line != reason_before:
            atomic_write(path.with_name(path.name + REASON_SUFFIX), line + "\n")
        raise StillRejected(f"{rel}: still rejected: {line}; fix the file, then retry")
    when = utcnow().strftime("%Y-%m-%d %H:%M UTC")
    note = f"By {by} at {when}; it had been rejected: {reason_before or 'no reason kept'}."
    atomic_write(path, _retried_text(text, path, task, note))
    dest = move_into(path, hive.tasks_dir, f"{task.id}.md")
    # Its reason is in the file's `## Retried` section now; the side file would only
    # be shown in tasks/ as a file that is no task.
    with contextlib.suppress(OSError):
        path.with_name(path.name + REASON_SUFFIX).unlink()
    return Retried(task.id, dest, TaskState.REJECTED, task.attempts)
