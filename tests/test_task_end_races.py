"""An agent ending a task while a person cancels or reassigns it: one of the two wins,
and the task ends up in exactly one place (never in done/ and failed/ both, never back
in tasks/ after a cancel).

The agent's ending is driven step by step (its durable steps stop before each flush),
so the person's move lands exactly between the agent's reading the task and its
publishing the ending.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hivemind.errors import UserError
from hivemind.hive import taskcontrol
from hivemind.hive.layout import Hive
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.ref import TaskRef
from tests.helpers import write_agent, write_task


def held(
    hive: Hive, stem: str, agent: str = "worker", front: str = ""
) -> tuple[TaskBoard, TaskRef]:
    write_agent(hive, agent)
    write_task(hive, stem, "Refund order 42.", front=front)
    board = TaskBoard(hive, settle_time=0, fsync=True)
    [ref] = [r for r in board.scan_pending() if r.id == stem]
    claimed = board.claim(ref, agent)
    assert claimed is not None
    return board, claimed


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.md")) if folder.is_dir() else []


def test_a_cancel_before_the_completion_lands_wins(hive: Hive) -> None:
    board, ref = held(hive, "t1")
    steps = board.complete_steps(ref, "Refunded.", "worker")
    next(steps)  # the finished version is written, not yet linked into done/

    taskcontrol.cancel(hive, "t1", "client withdrew")
    with pytest.raises(UserError, match=r"t1 was taken from worker .* not completed"):
        steps.send(None)

    assert files(hive.done_dir) == []
    assert files(hive.failed_dir) == ["t1.md"]
    text = (hive.failed_dir / "t1.md").read_text()
    assert "## Cancelled" in text and "## Result" not in text
    assert files(hive.active_dir_for("worker")) == []
    assert [p.name for p in hive.active_dir_for("worker").iterdir()] == []  # no temp left


def test_a_cancel_before_a_failure_lands_wins(hive: Hive) -> None:
    board, ref = held(hive, "t1", front="max_attempts: 3\n")
    steps = board.fail_steps(ref, "the API was down", "worker")
    next(steps)  # the failed version is written, not yet in place

    taskcontrol.cancel(hive, "t1")
    with pytest.raises(UserError, match=r"t1 was taken from worker .* not failed"):
        steps.send(None)

    assert files(hive.tasks_dir) == []  # not back in tasks/ for another attempt
    assert files(hive.failed_dir) == ["t1.md"]
    text = (hive.failed_dir / "t1.md").read_text()
    assert "## Cancelled" in text and "Attempt 1 failed" not in text
    assert [p.name for p in hive.active_dir_for("worker").iterdir()] == []


def test_a_reassign_before_a_failure_lands_wins(hive: Hive) -> None:
    board, ref = held(hive, "t1", front="max_attempts: 3\n")
    write_agent(hive, "other")
    steps = board.fail_steps(ref, "the API was down", "worker")
    next(steps)

    taskcontrol.reassign(hive, "t1", "other")
    with pytest.raises(UserError, match="not failed"):
        steps.send(None)

    assert files(hive.tasks_dir) == ["t1.md"]
    text = (hive.tasks_dir / "t1.md").read_text()
    assert "assignee: other" in text and "Attempt 1 failed" not in text
    assert files(hive.failed_dir) == []


def test_endings_without_a_race_are_unchanged(hive: Hive) -> None:
    board, ref = held(hive, "t1")
    done = board.complete(ref, "Refunded.", "worker")
    assert done.path == hive.done_dir / "t1.md"
    board, ref = held(hive, "t2", front="max_attempts: 1\n")
    failed = board.fail(ref, "no", "worker")
    assert failed.path == hive.failed_dir / "t2.md"
    assert files(hive.active_dir_for("worker")) == []


@pytest.mark.parametrize("swap", [True, False], ids=["renameat2-exchange", "no-exchange"])
def test_rewrite_writes_only_a_file_still_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: bool
) -> None:
    from hivemind.fs import atomic
    from hivemind.fs.steps import run

    if not swap:  # a system or filesystem without renameat2's exchange
        monkeypatch.setattr(atomic, "exchange", lambda src, dst: None)
    path = tmp_path / "t1.md"
    path.write_text("old\n")
    path.chmod(0o640)
    assert run(atomic.rewrite_steps(path, "new\n", fsync=False)) is True
    assert path.read_text() == "new\n" and (path.stat().st_mode & 0o777) == 0o640

    steps = atomic.rewrite_steps(path, "newer\n", fsync=True)
    next(steps)
    path.rename(tmp_path / "moved.md")
    with pytest.raises(StopIteration) as stop:
        steps.send(None)
    assert stop.value.value is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["moved.md"]  # no temp, no rewrite
    assert (tmp_path / "moved.md").read_text() == "new\n"
