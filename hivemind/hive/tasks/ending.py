"""Ending a held task: its finished version published, its claimed copy retired.

A finished version is written under a temp name beside the claimed copy,
flushed, and linked into done/ (or failed/) without replacing a file; then the
claimed copy is removed. A crash between the two leaves both, and
`retire_finished` removes the copy at the next start.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from hivemind.errors import FileFormatError
from hivemind.fs.atomic import write_temp
from hivemind.fs.noreplace import link_new, move_unique
from hivemind.fs.statcache import sig_of
from hivemind.fs.steps import Steps
from hivemind.hive.frontmatter import read_task, read_text, render_task, task_from_text
from hivemind.hive.layout import Hive
from hivemind.hive.models import Task, TaskState
from hivemind.hive.tasks.index import TaskIndex
from hivemind.hive.tasks.listing import md_files
from hivemind.hive.tasks.ref import TaskRef, as_utc

logger = logging.getLogger(__name__)


def held_text(index: TaskIndex, ref: TaskRef, task: Task) -> tuple[str, Task]:
    """The held task's file as it stands (its text and the task it reads as); `task`:
    as the board read it when it checked the task is held."""
    try:
        before = os.lstat(ref.path)
        text = read_text(ref.path)
        if sig_of(os.lstat(ref.path)) == sig_of(before):  # the version parsed before
            return text, index.parsed.load(ref.path, before, task_from_text)
        return text, task_from_text(text, ref.path)  # changed as it was read
    except (OSError, FileFormatError) as exc:
        # Changed again since the board read it: that version ends, rendered whole.
        logger.warning("%s: %s; the task ends as it was read before", ref.path, exc)
        return render_task(task), task


def publish_steps(
    task_id: str, text: str, beside: Path, folder: Path, *, fsync: bool
) -> Steps[Path]:
    """Write `text` into `folder` as `<task_id>.md` (or `-1.md`, ... if that name is
    taken), whole: under a temp name in `beside` first (a small folder: creating a
    file in a done/ of thousands took three times as long here), flushed, then
    linked in without replacing."""
    name, data = f"{task_id}.md", text.encode("utf-8")
    tmp = write_temp(beside, name, data, fsync=False)
    try:
        if fsync:
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


def retire(index: TaskIndex, path: Path) -> bool:
    """Remove the claimed copy of a task whose finished version is in done/; False if
    it was gone already: taken meanwhile (a person cancelled or reassigned the task,
    which renames the copy away), so the finished version must not stand.

    Removed here and now: a background thread for it (freeing a file is the slowest
    step of a completion on ext4) cost the event loop more in turns for the
    interpreter lock than the removal itself (measured). A copy that cannot be
    removed is listed nowhere by the board, and `retire_finished` tries again at
    the next start.
    """
    removed = _remove(path)
    if removed is False:
        index.leaving.add(path)
    return removed is not None


def retire_finished(index: TaskIndex, agent: str) -> list[str]:
    """Remove claimed copies of `agent`'s tasks that a crash left behind although
    their finished versions reached done/ (see `TaskBoard.complete_steps`); their ids.

    A finished version is this copy's when it has the same id and text (plus the
    result), was finished by `agent`, and after the copy was claimed (its ctime):
    an earlier task of the same id done before is not mistaken for it.
    """
    gone = []
    for path, st in md_files(index.hive.active_dir_for(agent)):
        twins = list(_done_versions(index.hive, path.name))
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
                    "the two steps)", path, index.hive.relative(twin))
        if _remove(path) is not False:
            index.parsed.forget(path)
            gone.append(claimed.id)
    if gone:
        index.forget_load()  # listed afresh
    return gone


def _done_versions(hive: Hive, name: str) -> Iterator[Path]:
    """done/<name> and the `<stem>-1.md`, ... names a taken name moves on to."""
    stem = name[:-3]
    for n in range(10_000):
        path = hive.done_dir / (name if n == 0 else f"{stem}-{n}.md")
        if not os.path.lexists(path):
            return
        yield path


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


def _remove(path: Path) -> bool | None:
    """Unlink `path`; False (logged) if it is still there, None if it was gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("%s: could not be removed: %s", path, exc)
        return False
    return True
