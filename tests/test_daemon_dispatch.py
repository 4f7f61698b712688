"""Dispatch: the pending set kept from events, best-first claims, stopping when full."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hivemind.daemon import dispatch_loop
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.dispatch import MAX_ACTIVE_PER_AGENT, Dispatcher
from hivemind.hive.layout import Hive
from hivemind.hive.models import TaskState
from hivemind.hive.quarantine import rejected
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.routing import Router
from hivemind.llm.base import ModelRequest, ModelResponse
from hivemind.llm.offline import OfflineProvider
from hivemind.settings import AgentConfig
from tests.helpers import (
    CountingProvider,
    fast_config,
    run_until_idle,
    until,
    write_agent,
    write_task,
)


def drop(hive: Hive, name: str, text: str) -> Path:
    path = hive.tasks_dir / name
    path.write_text(text, encoding="utf-8")
    return path


def agents(*specs: tuple[str, list[str]]) -> dict[str, AgentConfig]:
    return {n: AgentConfig(name=n, skills=s) for n, s in specs}


@pytest.fixture
def board(hive: Hive) -> TaskBoard:
    return TaskBoard(hive, settle_time=0)


def ids(board: TaskBoard) -> list[str]:
    return [r.id for r in board.pending_in_order()]


def test_a_refresh_with_changes_looks_only_at_the_named_files(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "a.md", "# A\n")
    board.refresh_pending()
    b = drop(hive, "b.md", "# B\n")
    board.refresh_pending(changed=[])
    assert ids(board) == ["a"]  # nobody named b.md: tasks/ was not listed
    board.refresh_pending(changed=[b])
    assert sorted(ids(board)) == ["a", "b"]
    drop(hive, "c.md", "# C\n")
    board.refresh_pending()  # the full listing finds what no event named
    assert sorted(ids(board)) == ["a", "b", "c"]


def test_named_files_that_changed_or_left_are_read_again(hive: Hive, board: TaskBoard) -> None:
    a = drop(hive, "a.md", "# A\n")
    b = drop(hive, "b.md", "# B\n")
    board.refresh_pending()
    a.write_text("---\npriority: critical\n---\n# A, urgent now\n", encoding="utf-8")
    b.unlink()
    board.refresh_pending(changed=[a, b])
    [ref] = board.pending_in_order()
    assert (ref.id, ref.task.title, ref.task.priority.value) == ("a", "A, urgent now", "critical")


def test_pending_tasks_come_best_first(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "low.md", "---\npriority: low\ncreated_at: 2026-01-01T00:00:00Z\n---\n# L\n")
    drop(hive, "old.md", "---\ncreated_at: 2026-01-01T00:00:00Z\n---\n# Old\n")
    drop(hive, "new.md", "---\ncreated_at: 2026-02-01T00:00:00Z\n---\n# New\n")
    drop(hive, "now.md", "---\npriority: critical\n---\n# Now\n")
    assert [r.id for r in board.scan_pending()] == ["now", "old", "new", "low"]


def test_claims_leave_the_set_and_retries_come_back_unnamed(
    hive: Hive, board: TaskBoard
) -> None:
    drop(hive, "a.md", "# A\n")
    board.refresh_pending()
    [ref] = board.pending_in_order()
    claimed = board.claim(ref, "ann")
    assert claimed is not None and ids(board) == []
    board.fail(claimed, "try again", "ann")
    board.refresh_pending(changed=[])  # the board knows what it moved into tasks/ itself
    assert ids(board) == ["a"]


def test_a_duplicate_id_named_by_an_event_is_rejected(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "a.md", "# A\n")
    board.refresh_pending()
    twin = drop(hive, "twin.md", "---\nid: a\n---\n# Twin\n")
    board.refresh_pending(changed=[twin])
    assert ids(board) == ["a"]
    [(kept, reason)] = rejected(hive)
    assert kept.name == "twin.md" and reason == "duplicate task id a (then in tasks/a.md)"


def test_a_task_already_done_is_a_duplicate(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "a.md", "# A\n")
    ref = board.claim(board.scan_pending()[0], "ann")
    assert ref is not None
    board.complete(ref, "ok", "ann")
    again = drop(hive, "again.md", "---\nid: a\n---\n# A again\n")
    board.refresh_pending(changed=[again])
    assert ids(board) == []
    [(_, reason)] = rejected(hive)
    assert reason == "duplicate task id a (then in tasks/done/a.md)"


def test_dispatch_fills_every_agent_then_stops(hive: Hive, board: TaskBoard) -> None:
    for i in range(20):
        drop(hive, f"t{i:02d}.md", f"# Task {i}\n")
    dispatcher = Dispatcher(board, max_active=2)
    team = agents(("ann", []), ("bob", []), ("cy", []))
    result = dispatcher.dispatch(team)
    assert result.claimed == {"ann": 2, "bob": 2, "cy": 2}
    assert len(result.waiting) == 14 and {why for _, why in result.waiting} == {
        "every agent is busy"
    }
    assert board.counts()[TaskState.PENDING] == 14
    # One task of bob's is done: the next dispatch, told of no change, gives him one.
    [first, *_] = board.active("bob")
    board.complete(first, "ok", "bob")
    again = dispatcher.dispatch(team, changed=[])
    assert again.claimed == {"bob": 1}
    assert board.counts()[TaskState.PENDING] == 13


def test_a_sub_task_is_claimed_by_its_busy_assignee(hive: Hive, board: TaskBoard) -> None:
    """Before: agents full of tasks that each waited on a sub-task left the sub-tasks
    pending for ever (every agent is busy), and the delegation never ended."""
    for i in range(4):
        drop(hive, f"t{i}.md", f"# Task {i}\n")
    dispatcher = Dispatcher(board, max_active=2)
    team = agents(("ann", []), ("bob", []))
    assert dispatcher.dispatch(team).claimed == {"ann": 2, "bob": 2}
    drop(hive, "late.md", "# Not delegated\n")
    drop(hive, "sub.md", "---\nassignee: bob\nlineage: {root: t0, parent: t0, depth: 1, "
         "agents: [ann]}\n---\n# Part of t0\n")
    result = dispatcher.dispatch(team)
    assert result.claimed == {"bob": 1}
    assert (hive.active_dir_for("bob") / "sub.md").is_file()
    assert ("late", "every agent is busy") in result.waiting


def test_dispatch_routes_by_skills_and_follows_rom_edits(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "doc.md", "# Write the docs\n\nThe install guide.\n")
    dispatcher = Dispatcher(board, max_active=4)
    before = agents(("ann", ["docs"]), ("bob", ["install"]))
    board.refresh_pending()
    # Both match one word of the task: the tie goes to the least loaded, then by name.
    task = next(board.pending_in_order()).task
    assert Router(list(before.values())).candidates(task) == ["ann", "bob"]
    after = agents(("ann", ["billing"]), ("bob", ["install"]))
    assert dispatcher.dispatch(after).claimed == {"bob": 1}


def test_dispatch_says_why_a_task_waits(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "mine.md", "---\nassignee: zed\n---\n# For zed\n")
    drop(hive, "later.md", "---\ndepends_on: [mine]\n---\n# After mine\n")
    ann = AgentConfig(name="ann", accepts_unassigned=False)
    result = Dispatcher(board).dispatch({"ann": ann})
    assert dict(result.waiting) == {
        "mine": "assigned to zed, which is no agent of this hive: it waits in tasks/ until "
                "agents/zed/ROM.md exists or it is given to another agent (hivemind task "
                "reassign mine AGENT)",
        "later": "waits for mine",
    }
    assert not result.claimed


def test_load_follows_this_boards_moves_and_rereads_the_disk_later(
    hive: Hive, board: TaskBoard, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b"):
        drop(hive, f"{name}.md", f"# {name}\n")
    refs = board.scan_pending()
    for ref in refs:
        board.claim(ref, "ann")
    assert board.load() == {"ann": 2}
    (hive.active_dir_for("ann") / "a.md").rename(hive.tasks_dir / "a.md")  # by hand
    assert board.load() == {"ann": 2}  # trusted for LOAD_TTL seconds
    monkeypatch.setattr("hivemind.hive.tasks.index.LOAD_TTL", 0.0)
    assert board.load() == {"ann": 1}


class DropsDuringItsFirstCall(CountingProvider):
    """The offline provider; its first call drops a task and takes a while, so the
    watcher asks for a dispatch while that cycle is in flight."""

    def __init__(self, hive: Hive) -> None:
        super().__init__()
        self.hive = hive

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not self.requests:
            write_task(self.hive, "late")
            await asyncio.sleep(0.5)
        return await super().complete(request)


def test_the_wait_to_gather_completions_ends_with_the_last_cycle_in_flight(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dispatch asked for while cycles run waits to take their ends in one scan, but no
    longer than the last of them: then nothing more is coming. With the wait made huge
    here, the lone agent's next claims would otherwise stall on it."""
    monkeypatch.setattr(dispatch_loop, "DISPATCH_COALESCE", 60.0)
    write_agent(hive, "solo")
    for i in range(3 * MAX_ACTIVE_PER_AGENT):
        write_task(hive, f"t{i:02d}")
    provider = DropsDuringItsFirstCall(hive)

    daemon = run_until_idle(hive, provider, timeout=30)

    assert daemon.exit_reason == "idle"
    assert len(list(hive.done_dir.glob("*.md"))) == 3 * MAX_ACTIVE_PER_AGENT + 1


async def test_a_rom_edit_routes_the_tasks_that_waited_for_an_agent(hive: Hive) -> None:
    """A task no agent accepts waits; the ROM edit that lets one take it is enough to
    route it (before: only the next full listing of tasks/, minutes later, did)."""
    write_agent(hive, "bob", front="accepts_unassigned: false\n")
    write_task(hive, "anyones")
    config = fast_config(hive)
    config.daemon.rescan_interval = 60.0  # no full dispatch within this test
    daemon = Daemon(hive, config, OfflineProvider(), RunOptions())
    run = asyncio.create_task(daemon.run())
    try:
        await until(lambda: daemon.waiting == [("anyones", "no agent accepts it")], "it waits")
        hive.rom_path("bob").write_text("---\nrole: bob\n---\nDo tasks.\n")
        await until((hive.done_dir / "anyones.md").exists, "bob did it")
    finally:
        daemon.stop("test")
        await asyncio.wait_for(run, 20)


def test_an_agent_whose_tools_cannot_finish_a_task_is_given_none(hive: Hive) -> None:
    """`tools:` without complete_task and fail_task: a task it took would stay in
    tasks/active/ for good. It gets none; one assigned to it waits, saying why."""
    write_agent(hive, "talker", front="tools: [send_message]\n")
    write_agent(hive, "doer")
    write_task(hive, "anyones")
    write_task(hive, "for-talker", front="assignee: talker\n")

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "stalled"
    assert "agent: doer" in (hive.done_dir / "anyones.md").read_text()
    assert (hive.tasks_dir / "for-talker.md").is_file()
    assert daemon.waiting == [("for-talker", "assigned to talker, which cannot finish a task: "
                               "its ROM's tools: allow neither complete_task nor fail_task")]
