"""Temp files a stopped process left behind, removed when the daemon starts.

Every file the hive writes goes through a temp name first (`atomic.temp_name`:
`.<name>.<pid>-<salt>-<n>.tmp`; status.json's is `.status.<pid>.tmp`). A process
killed between writing one and renaming it leaves it there: readers skip it, so
nothing is lost, but nothing would ever remove it either. A temp name whose
process is gone is such a leftover; one of a live process (a CLI command running
beside the daemon) is left alone, and so is every name the hive did not make
(an editor's `.notes.md.tmp`).

A task being changed by hand (`task cancel`, `task reassign`) is parked for a moment
under a hidden name (`parked_name`); one whose process is gone is put back under its
own name, never removed: it is a person's task.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from hivemind.fs.atomic import temp_writer
from hivemind.fs.noreplace import move_unique
from hivemind.fs.treewalk import walk
from hivemind.hive.layout import Hive

logger = logging.getLogger(__name__)

_STATUS = re.compile(r"\A\.status\.(\d+)\.tmp\Z")  # status.json's own temp name
_PARKED = re.compile(r"\A\.(.+\.md)\.(\d+)\.changing\Z", re.DOTALL)


def parked_name(name: str, pid: int) -> str:
    """The hidden name a task file has while a person's command rewrites it: no board
    reads it, and `restore_parked` puts it back if that command is killed."""
    return f".{name}.{pid}.changing"


def writer_pid(name: str) -> int | None:
    """The pid in a temp name the hive made; None for any other name."""
    pid = temp_writer(name)
    if pid is None and (match := _STATUS.match(name)):
        pid = int(match.group(1))
    return pid


def pid_alive(pid: object, *, if_unsure: bool = True) -> bool:
    """True if `pid` names a live process (another user's counts). `if_unsure`: the
    answer for what is no pid one can ask about (0, -1 and the like would ask about a
    whole process group): keep a temp file, say, but call no daemon running."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return if_unsure
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except OverflowError:
        return if_unsure
    return True


def _subfolders(parent: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(parent) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _folders(hive: Hive) -> Iterator[Path]:
    """Where the hive writes through temp names: its own folders, not the whole root
    (the example hive is a source checkout)."""
    yield from (hive.state_dir, hive.tasks_dir, hive.done_dir, hive.failed_dir)
    yield from _subfolders(hive.active_dir)
    yield from _subfolders(hive.agents_dir)
    yield from (box / "tmp" for box in _subfolders(hive.mailboxes_dir))
    for tree in (hive.workspace_dir, hive.knowledge_dir):
        for dirpath, _dirs, _files in walk(os.fspath(tree)):  # links are not followed
            yield Path(dirpath)


def restore_parked(hive: Hive) -> list[Path]:
    """Put back under their own names the task files a killed `task cancel` or `task
    reassign` left parked in tasks/ or failed/ (never replacing a file: else
    `<stem>-1.md`); the paths they have now."""
    restored: list[Path] = []
    for folder in (hive.tasks_dir, hive.failed_dir):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            match = _PARKED.match(entry.name)
            if (match is None or not entry.is_file(follow_symlinks=False)
                    or pid_alive(int(match.group(2)))):
                continue
            try:
                restored.append(move_unique(Path(entry.path), folder, match.group(1)))
            except OSError as exc:
                logger.warning("%s: a task a stopped command was changing could not be put "
                               "back: %s", entry.path, exc)
                continue
            logger.warning("%s: put back; the command changing it was stopped half-way",
                           restored[-1])
    return restored


def sweep_temps(hive: Hive) -> list[Path]:
    """Remove the temp files of processes that are gone; the paths removed."""
    removed: list[Path] = []
    alive: dict[int, bool] = {}
    for folder in _folders(hive):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            pid = writer_pid(entry.name)
            if pid is None or not entry.is_file(follow_symlinks=False):
                continue
            if pid not in alive:
                alive[pid] = pid_alive(pid)
            if alive[pid]:
                continue
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                logger.warning("%s: a stopped process's temp file could not be removed: %s",
                               entry.path, exc)
                continue
            removed.append(Path(entry.path))
    if removed:
        logger.info("removed %d temp file(s) left by stopped processes", len(removed))
    return removed
