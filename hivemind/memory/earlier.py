"""Earlier steps: what a long task's history becomes when the janitor lets it go.

The janitor keeps the newest history blocks (and none older than an hour); the
steps it removes for tasks still held fold into one CONTEXT block, a line per
step, so a decision taken at the start of a long task stays in view. The first
steps stay (they set the course), then the newest; a marker counts those left
out between. When the agent holds none of the tasks a line was for any more,
the line goes too: a finished task is summed up by its outcome elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from hivemind.memory.blocks import ContextBlock, HistoryBlock, Priority
from hivemind.memory.manager import WorkingMemoryManager

EARLIER_ID = "context:earlier_steps"
FIRST_KEPT = 8  # the first steps stay
LINES_KEPT = 24  # in all, with the newest
LINE_CHARS = 200
_LINES = "earlier_steps"  # the manager's scratch key: [(task ids, line)]
_SKIPPED = "earlier_steps_skipped"  # steps left out between the first and the newest


def fold(manager: WorkingMemoryManager, steps: Iterable[HistoryBlock]) -> None:
    """Add a line per step for a task (oldest first) to the earlier-steps block."""
    lines: list[tuple[tuple[str, ...], str]] = list(manager.scratch.get(_LINES, []))
    skipped: int = manager.scratch.get(_SKIPPED, 0)
    added = False
    for step in sorted(steps, key=lambda b: b.timestamp.timestamp()):
        ids = tuple(step.metadata.get("task_ids") or ())
        if not ids:
            continue  # a step for no task (mail answered between tasks) just goes
        text = " ".join(step.inline_content().split())
        if len(text) > LINE_CHARS:
            text = text[: LINE_CHARS - 1] + "…"
        lines.append((ids, text))
        added = True
    if not added:
        return
    if len(lines) > LINES_KEPT:
        # Cut the middle back by half at once: between cuts the block only grows at its
        # end, and the request before serves the prompt cache up to there.
        keep_newest = (LINES_KEPT - FIRST_KEPT) // 2
        cut = len(lines) - FIRST_KEPT - keep_newest
        skipped += cut
        lines = lines[:FIRST_KEPT] + lines[-keep_newest:]
    _save(manager, lines, skipped)


def keep_tasks(manager: WorkingMemoryManager, held: set[str]) -> None:
    """Drop the lines of steps for none of the tasks `held`."""
    lines: list[tuple[tuple[str, ...], str]] = manager.scratch.get(_LINES, [])
    kept = [(ids, text) for ids, text in lines if not held.isdisjoint(ids)]
    if len(kept) != len(lines):
        _save(manager, kept, manager.scratch.get(_SKIPPED, 0) if kept else 0)


def _save(manager: WorkingMemoryManager, lines: list[tuple[tuple[str, ...], str]],
          skipped: int) -> None:
    manager.scratch[_LINES], manager.scratch[_SKIPPED] = lines, skipped
    if not lines:
        manager.remove(EARLIER_ID)
        return
    shown = [f"- [{', '.join(ids)}] {text}" for ids, text in lines]
    if skipped:
        shown.insert(min(FIRST_KEPT, len(shown)), f"- [… {skipped} more steps …]")
    manager.add(ContextBlock(
        id=EARLIER_ID, context_type="earlier_steps", priority=Priority.MEDIUM,
        summary="\n".join(["Your earlier steps, [for tasks], oldest first:", *shown]),
    ))
