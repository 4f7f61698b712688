"""Earlier steps: what a long task's history becomes when the janitor lets it go.

The janitor keeps the newest history blocks (and none older than an hour); the
steps it removes for tasks still held fold into one CONTEXT block, a line per
step, so a decision taken at the start of a long task stays in view. Per task
(the tasks a step was for), the first steps stay (they set the course), then the
newest; a marker counts those left out between. When the agent holds none of
the tasks a line was for any more, the line goes too: a finished task is summed
up by its outcome elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from hivemind.memory.blocks import ContextBlock, HistoryBlock, Priority
from hivemind.memory.compressor import clip
from hivemind.memory.manager import WorkingMemoryManager

EARLIER_ID = "context:earlier_steps"
FIRST_KEPT = 8  # per task, the first steps stay
LINES_KEPT = 24  # per task, in all, with the newest
LINE_CHARS = 200
_KEY = "earlier_steps"  # the manager's scratch key: {task ids: _Thread}


@dataclass
class _Thread:
    """The lines of the steps for one set of tasks, and how many were left out."""

    lines: list[str] = field(default_factory=list)
    skipped: int = 0

    def add(self, line: str) -> None:
        self.lines.append(line)
        if len(self.lines) > LINES_KEPT:
            # Cut the middle back by half at once: between cuts the block only grows at
            # its end, and the request before serves the prompt cache up to there.
            newest = (LINES_KEPT - FIRST_KEPT) // 2
            cut = len(self.lines) - FIRST_KEPT - newest
            self.skipped += cut
            self.lines = self.lines[:FIRST_KEPT] + self.lines[-newest:]


def fold(manager: WorkingMemoryManager, steps: Iterable[HistoryBlock]) -> None:
    """Add a line per step for a task (oldest first) to the earlier-steps block."""
    threads: dict[tuple[str, ...], _Thread] = manager.scratch.setdefault(_KEY, {})
    added = False
    for step in sorted(steps, key=lambda b: b.timestamp.timestamp()):
        ids = tuple(step.metadata.get("task_ids") or ())
        if not ids:
            continue  # a step for no task (mail answered between tasks) just goes
        text = clip(" ".join(step.inline_content().split()), LINE_CHARS)
        threads.setdefault(ids, _Thread()).add(text)
        added = True
    if added:
        _show(manager, threads)


def add_skipped(manager: WorkingMemoryManager, task_ids: tuple[str, ...], n: int) -> None:
    """Count `n` more steps for `task_ids` left out after its first lines (a restart
    that read a long log)."""
    if n > 0:
        threads: dict[tuple[str, ...], _Thread] = manager.scratch.setdefault(_KEY, {})
        threads.setdefault(task_ids, _Thread()).skipped += n
        _show(manager, threads)


def keep_tasks(manager: WorkingMemoryManager, held: set[str]) -> None:
    """Drop the lines of steps for none of the tasks `held`."""
    threads: dict[tuple[str, ...], _Thread] = manager.scratch.get(_KEY, {})
    gone = [ids for ids in threads if held.isdisjoint(ids)]
    for ids in gone:
        del threads[ids]
    if gone:
        _show(manager, threads)


def _show(manager: WorkingMemoryManager, threads: dict[tuple[str, ...], _Thread]) -> None:
    if not threads:
        manager.remove(EARLIER_ID)
        return
    shown = ["Your earlier steps, per task, oldest first:"]
    for ids, thread in threads.items():
        tag = f"- [{', '.join(ids)}] "
        lines = [tag + line for line in thread.lines]
        if thread.skipped:
            lines.insert(min(FIRST_KEPT, len(lines)), f"{tag}[… {thread.skipped} more steps …]")
        shown.extend(lines)
    manager.add(ContextBlock(
        id=EARLIER_ID, context_type="earlier_steps", priority=Priority.MEDIUM,
        summary="\n".join(shown),
    ))
