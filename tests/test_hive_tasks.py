"""The task board: drop, scan, claim exactly once, complete, fail, route, reject."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest
from test_hive_frontmatter import BAD_TASKS

from hivemind.errors import UserError
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive
from hivemind.hive.models import Task, TaskPriority, TaskState
from hivemind.hive.quarantine import rejected
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.pending import EMPTY_GRACE
from hivemind.hive.tasks.ref import TaskRef
from hivemind.settings import AgentConfig


def drop(hive: Hive, name: str, content: str | bytes) -> Path:
    path = hive.tasks_dir / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def agent(name: str, skills: list[str] | None = None, accepts: bool = True) -> AgentConfig:
    return AgentConfig(name=name, skills=skills or [], accepts_unassigned=accepts)


@pytest.fixture
def board(hive: Hive) -> TaskBoard:
    return TaskBoard(hive, settle_time=0)


def pending_one(board: TaskBoard) -> TaskRef:
    [ref] = board.scan_pending()
    return ref


# -- reading the drop zone ------------------------------------------------------


@pytest.mark.parametrize(("content", "reason"), BAD_TASKS)
def test_bad_task_file_is_moved_unchanged_to_rejected_with_its_reason(
    hive: Hive, board: TaskBoard, content: str | bytes, reason: str
) -> None:
    original = content.encode() if isinstance(content, str) else content
    path = drop(hive, "bad.md", content)
    old = time.time() - EMPTY_GRACE - 1  # an empty file is given time to fill: not this one
    os.utime(path, (old, old))
    assert board.scan_pending() == []
    [(moved, why)] = rejected(hive)
    assert moved == hive.rejected_dir / "bad.md"
    assert moved.read_bytes() == original  # whole and unchanged
    assert why.startswith(reason)
    assert not (hive.tasks_dir / "bad.md").exists()


def test_an_empty_task_file_waits_for_its_text(hive: Hive, board: TaskBoard) -> None:
    """`slow-command > tasks/x.md` makes the file at once and writes it later: a fresh
    empty file is not rejected (its writer would fill the file in rejected/, under a
    reason saying it is empty); it becomes a task once written."""
    path = drop(hive, "slow.md", "")
    assert board.scan_pending() == []
    assert board.scan_pending() == []
    assert rejected(hive) == [] and path.exists()
    assert board.unsettled == 1  # looked at again at the next refresh
    path.write_text("# Summarise the notes\n")
    assert [r.id for r in board.scan_pending([])] == ["slow"]


def test_an_empty_task_file_left_empty_is_rejected(hive: Hive, board: TaskBoard) -> None:
    path = drop(hive, "touched.md", "")
    board.scan_pending()
    old = time.time() - EMPTY_GRACE - 1
    os.utime(path, (old, old))
    assert board.scan_pending([]) == []
    [(moved, why)] = rejected(hive)
    assert moved.name == "touched.md" and why.startswith("file is empty")


def test_rejected_names_never_collide(hive: Hive, board: TaskBoard) -> None:
    for _ in range(3):
        drop(hive, "bad.md", "---\npriority: urgent\n---\n")
        board.scan_pending()
    names = sorted(p.name for p, _ in rejected(hive))
    assert names == ["bad-1.md", "bad-2.md", "bad.md"]
    assert (hive.rejected_dir / "bad-2.md.reason").is_file()


def test_temp_and_non_markdown_names_are_ignored(hive: Hive, board: TaskBoard) -> None:
    for name in (".x.md", "x.md~", "x.md.swp", "x.tmp", "#x.md#", "notes.txt"):
        drop(hive, name, "---\npriority: urgent\n---\n")
    assert board.scan_pending() == []
    assert rejected(hive) == []


def test_a_symlink_dropped_as_a_task_is_rejected_not_followed(
    hive: Hive, board: TaskBoard, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n")
    (hive.tasks_dir / "link.md").symlink_to(secret)
    assert board.scan_pending() == []
    [(moved, why)] = rejected(hive)
    assert moved.is_symlink() and "symbolic link" in why
    assert secret.read_text() == "# Secret\n"


def test_half_written_file_is_read_only_once_stable(hive: Hive) -> None:
    board = TaskBoard(hive, settle_time=0.3)
    path = drop(hive, "slow.md", "---\ntitle: Sl")  # an unfinished write: bad YAML so far
    assert board.scan_pending() == []
    time.sleep(0.1)
    with path.open("a") as f:
        f.write("ow\npriority: high\n---\nbody\n")
    assert board.scan_pending() == []  # changed again: the clock restarts
    time.sleep(0.35)
    [ref] = board.scan_pending()
    assert (ref.task.title, ref.task.priority) == ("Slow", TaskPriority.HIGH)
    assert rejected(hive) == []


def test_file_with_a_future_mtime_is_read_after_being_watched_stable(hive: Hive) -> None:
    board = TaskBoard(hive, settle_time=0.2)
    path = drop(hive, "skewed.md", "# From a server with a fast clock\n")
    future = time.time() + 3600
    os.utime(path, (future, future))
    assert board.scan_pending() == []
    time.sleep(0.25)
    assert [r.id for r in board.scan_pending()] == ["skewed"]


def test_duplicate_id_among_dropped_files_rejects_the_second(hive: Hive, board: TaskBoard) -> None:
    first = drop(hive, "a.md", "---\nid: same\n---\nfirst\n")
    os.utime(first, (time.time() - 10, time.time() - 10))
    drop(hive, "b.md", "---\nid: same\n---\nsecond\n")
    [ref] = board.scan_pending()
    assert ref.path.name == "a.md"
    [(moved, why)] = rejected(hive)
    assert moved.name == "b.md"
    assert why == "duplicate task id same (then in tasks/a.md)"


def test_dropped_file_with_the_id_of_a_done_task_is_rejected(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "x.md", "# X\n")
    done = board.complete(board.claim(pending_one(board), "ann"), "ok", "ann")  # type: ignore[arg-type]
    assert done.path == hive.done_dir / "x.md"
    drop(hive, "again.md", "---\nid: x\n---\n# X again\n")
    assert board.scan_pending() == []
    [(_, why)] = rejected(hive)
    assert why == "duplicate task id x (then in tasks/done/x.md)"


# -- creating ---------------------------------------------------------------------


def test_create_writes_the_task_file_whole(hive: Hive, board: TaskBoard) -> None:
    ref = board.create(Task(id="t1", title="Write docs", body="Details.\n"), created_by="human")
    assert ref.path == hive.tasks_dir / "t1.md"
    task = read_task(ref.path)
    assert (task.title, task.created_by, task.body) == ("Write docs", "human", "Details.")
    assert task.created_at is not None
    assert [p.name for p in hive.tasks_dir.iterdir() if p.is_file()] == ["t1.md"]


@pytest.mark.parametrize("where", ["pending", "active", "done", "failed"])
def test_create_refuses_an_id_already_on_the_board(
    hive: Hive, board: TaskBoard, where: str
) -> None:
    ref = board.create(Task(id="dup", body="x"))
    if where != "pending":
        ref = board.claim(ref, "ann")  # type: ignore[assignment]
    if where == "done":
        board.complete(ref, "ok", "ann")
    if where == "failed":
        board.fail(ref, "no", "ann", final=True)
    with pytest.raises(UserError, match=r"duplicate task id dup \(already in tasks/"):
        board.create(Task(id="dup", body="again"))


def test_create_refuses_an_id_used_inside_another_pending_file(
    hive: Hive, board: TaskBoard
) -> None:
    drop(hive, "other-name.md", "---\nid: taken\n---\nx\n")
    with pytest.raises(UserError, match=r"already in tasks/other-name.md"):
        board.create(Task(id="taken", body="x"))


def test_new_task_id_is_a_unique_slug(board: TaskBoard) -> None:
    assert board.new_task_id("Fix the Login bug!") == "fix-the-login-bug"
    board.create(Task(id="fix-the-login-bug", body="x"))
    assert board.new_task_id("Fix the login bug") == "fix-the-login-bug-2"


# -- claiming -----------------------------------------------------------------------


def test_claim_is_a_rename_that_leaves_the_file_as_written(hive: Hive, board: TaskBoard) -> None:
    text = "---\npriority: high\ncolour: red\n---\n# Job\n\nDo it.\n"
    drop(hive, "job.md", text)
    claimed = board.claim(pending_one(board), "ann")
    assert claimed is not None
    assert claimed.path == hive.active_dir_for("ann") / "job.md"
    assert (claimed.state, claimed.agent, claimed.task.status) == (
        TaskState.ACTIVE, "ann", TaskState.ACTIVE
    )
    assert claimed.path.read_text() == text  # the folder is the claim; nothing rewritten
    assert [(r.id, r.agent) for r in board.active("ann")] == [("job", "ann")]
    done = board.complete(claimed, "ok", "ann")
    on_disk = read_task(done.path)
    assert (on_disk.status, on_disk.agent) == (TaskState.DONE, "ann")
    assert on_disk.extra == {"colour": "red"}  # unknown fields survive the rewrite
    assert on_disk.body == "# Job\n\nDo it.\n\n## Result\n\nok"


def test_a_dropped_file_saying_done_still_gets_its_result(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "job.md", "---\nstatus: done\n---\n# Job\n")
    claimed = board.claim(pending_one(board), "ann")
    assert claimed is not None
    done = board.complete(claimed, "the answer", "ann")
    assert "## Result\n\nthe answer" in done.path.read_text()


def test_the_loser_of_a_claim_gets_none(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "job.md", "# Job\n")
    ref = pending_one(board)
    other = TaskBoard(hive, settle_time=0)
    [same] = other.scan_pending()
    assert board.claim(ref, "ann") is not None
    assert other.claim(same, "bob") is None
    assert board.counts()[TaskState.ACTIVE] == 1


def test_task_with_unfinished_dependencies_is_not_claimable(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "second.md", "---\ndepends_on: first\n---\n# Second\n")
    drop(hive, "first.md", "# First\n")
    refs = {r.id: r for r in board.scan_pending()}
    assert not board.is_claimable(refs["second"])
    assert board.claim(refs["second"], "ann") is None
    assert [r.id for r in board.claimable_for("ann", [agent("ann")])] == ["first"]
    first = board.claim(refs["first"], "ann")
    assert first is not None
    board.complete(first, "done", "ann")
    assert board.is_claimable(refs["second"])
    assert board.claim(refs["second"], "ann") is not None


def test_claim_many_claims_a_batch_and_skips_the_lost_ones(hive: Hive, board: TaskBoard) -> None:
    for name in ("a", "b", "c"):
        drop(hive, f"{name}.md", f"# {name}\n")
    refs = board.scan_pending()
    rival = TaskBoard(hive, settle_time=0)
    assert rival.claim(next(r for r in rival.scan_pending() if r.id == "b"), "bob") is not None
    got = board.claim_many([(r, "ann") for r in refs])
    assert [g.id if g else None for g in got] == ["a", None, "c"]
    assert sorted(r.id for r in board.active("ann")) == ["a", "c"]
    assert all(g.agent == "ann" and g.path.parent.name == "ann" for g in got if g)


def test_tasks_already_active_at_start_belong_to_their_agent(hive: Hive) -> None:
    folder = hive.active_dir_for("ann")
    folder.mkdir(parents=True)
    (folder / "left.md").write_text("---\nstatus: active\nagent: ann\n---\n# Left over\n")
    board = TaskBoard(hive)
    [ref] = board.active("ann")
    assert (ref.id, ref.state, ref.agent) == ("left", TaskState.ACTIVE, "ann")
    assert board.active("bob") == []


def _racer(
    root: str, name: str, start: mp.synchronize.Event, out: mp.Queue[tuple[str, list[str]]]
) -> None:
    # fsync makes a claim durable, not exclusive: the race is the same without it, faster.
    board = TaskBoard(Hive(root), settle_time=0, fsync=False)
    refs = board.scan_pending()
    start.wait()
    won = [r.id for r in refs if board.claim(r, name) is not None]
    out.put((name, won))


def test_eight_processes_racing_claim_each_of_1000_tasks_exactly_once(hive: Hive) -> None:
    board = TaskBoard(hive, settle_time=0, fsync=False)
    for i in range(1000):
        board.create(Task(id=f"t{i:04d}", body=f"# Task {i}\n"))
    ctx = mp.get_context("fork")
    start, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_racer, args=(str(hive.root), f"a{i}", start, out)) for i in range(8)
    ]
    for p in procs:
        p.start()
    time.sleep(0.3)  # most of them have scanned; the rest join the race late
    start.set()
    reports = dict(out.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(timeout=10)
    won = [task_id for ids in reports.values() for task_id in ids]
    assert len(won) == 1000 and len(set(won)) == 1000
    on_disk = [p.stem for p in hive.active_dir.glob("*/*.md")]
    assert sorted(on_disk) == sorted(won)
    for name, ids in reports.items():
        assert sorted(p.stem for p in hive.active_dir_for(name).glob("*.md")) == sorted(ids)
    assert list(hive.tasks_dir.glob("*.md")) == []


# -- finishing ------------------------------------------------------------------------


def test_complete_appends_the_result_and_moves_to_done(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "job.md", "# Job\n\nDo it.\n")
    claimed = board.claim(pending_one(board), "ann")
    assert claimed is not None
    done = board.complete(claimed, "It is done: see workspace/out.md", "ann")
    assert done.path == hive.done_dir / "job.md" and done.state is TaskState.DONE
    task = read_task(done.path)
    assert (task.status, task.agent) == (TaskState.DONE, "ann")
    assert task.finished_at is not None
    assert task.body == "# Job\n\nDo it.\n\n## Result\n\nIt is done: see workspace/out.md"
    assert board.done_ids() == {"job"}
    assert not claimed.path.exists()


PERSONS_TASK = (
    "---\n"
    "# Ticket JIRA-123: the customer's words, keep them\n"
    "priority: medium\n"
    "labels:\n"
    "  - billing   # the team's tag\n"
    "max_attempts: 2\n"
    "---\n"
    "# Refund\n"
    "\n"
    "Refund order 42.   \n"
    "\n"
    "\n"
    "Mind the VAT.\n"
)


def test_a_finished_task_keeps_every_line_the_person_wrote(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "refund.md", PERSONS_TASK)
    claimed = board.claim(pending_one(board), "ann")
    assert claimed is not None
    done = board.complete(claimed, "Refunded.", "ann")
    text = done.path.read_text()
    front, body = PERSONS_TASK.split("---\n")[1], PERSONS_TASK.split("---\n")[2]
    assert text.startswith("---\n" + front)  # comments, defaults, layout: byte for byte
    assert text.endswith(body + "\n## Result\n\nRefunded.\n")
    task = read_task(done.path)
    assert (task.status, task.agent, task.extra["labels"]) == (TaskState.DONE, "ann", ["billing"])
    assert task.finished_at is not None


def test_a_failed_task_keeps_every_line_the_person_wrote(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "refund.md", PERSONS_TASK)
    back = board.fail(board.claim(pending_one(board), "ann"), "no access", "ann")  # type: ignore[arg-type]
    failed = board.fail(board.claim(pending_one(board), "bob"), "still none", "bob")  # type: ignore[arg-type]
    assert back.state is TaskState.PENDING and failed.state is TaskState.FAILED
    text = failed.path.read_text()
    assert text.startswith("---\n" + PERSONS_TASK.split("---\n")[1])
    assert "Mind the VAT.\n\n## Attempt 1 failed\n\nno access\n\n## Attempt 2 failed" in text
    task = read_task(failed.path)
    assert (task.attempts, task.status, task.agent) == (2, TaskState.FAILED, "bob")


def test_ending_a_task_does_not_warn_of_its_fields_again(
    hive: Hive, board: TaskBoard, caplog: pytest.LogCaptureFixture
) -> None:
    drop(hive, "refund.md", PERSONS_TASK)
    board.complete(board.claim(pending_one(board), "ann"), "Refunded.", "ann")  # type: ignore[arg-type]
    said = [r for r in caplog.records if "unknown field 'labels'" in r.getMessage()]
    assert len(said) == 1  # when it was first read, not again as it ends


def test_a_flow_style_front_matter_still_ends_whole(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "job.md", "---\n{priority: high}\n---\n# Job\n")
    done = board.complete(board.claim(pending_one(board), "ann"), "ok", "ann")  # type: ignore[arg-type]
    task = read_task(done.path)
    assert (task.status, task.priority, task.body) == (
        TaskState.DONE, TaskPriority.HIGH, "# Job\n\n## Result\n\nok")


def test_completing_a_task_another_agent_holds_is_refused(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "job.md", "# Job\n")
    claimed = board.claim(pending_one(board), "ann")
    assert claimed is not None
    with pytest.raises(UserError, match="not claimed by bob"):
        board.complete(claimed, "mine now", "bob")


def test_fail_retries_until_max_attempts_then_moves_to_failed(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "flaky.md", "---\nmax_attempts: 2\n---\n# Flaky\n")
    first = board.fail(board.claim(pending_one(board), "ann"), "network down", "ann")  # type: ignore[arg-type]
    assert first.state is TaskState.PENDING and first.path == hive.tasks_dir / "flaky.md"
    assert read_task(first.path).attempts == 1
    second = board.fail(board.claim(pending_one(board), "bob"), "still down", "bob")  # type: ignore[arg-type]
    assert second.state is TaskState.FAILED and second.path == hive.failed_dir / "flaky.md"
    task = read_task(second.path)
    assert (task.attempts, task.status, task.agent) == (2, TaskState.FAILED, "bob")
    assert "## Attempt 1 failed\n\nnetwork down\n" in task.body
    assert "## Attempt 2 failed\n\nstill down" in task.body
    assert board.counts()[TaskState.FAILED] == 1


def test_a_retry_never_overwrites_a_new_file_of_the_same_name(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "job.md", "# Job\n")
    claimed = board.claim(pending_one(board), "ann")
    assert claimed is not None
    drop(hive, "job.md", "---\nid: other-job\n---\n# Another job\n")
    back = board.fail(claimed, "retry", "ann")
    assert back.path == hive.tasks_dir / "job-1.md"
    assert read_task(hive.tasks_dir / "job.md").id == "other-job"


# -- routing ----------------------------------------------------------------------------


def test_explicit_assignee_wins_when_that_agent_exists(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "a.md", "---\nassignee: bob\n---\n# Python refactor\n")
    agents = [agent("ann", ["python"]), agent("bob")]
    assert board.route(pending_one(board), agents) == "bob"


def test_unknown_assignee_is_routed_to_nobody(hive: Hive, board: TaskBoard) -> None:
    """It waits for its agent (or to be reassigned), never taken by another."""
    drop(hive, "a.md", "---\nassignee: nobody\n---\n# Python refactor\n")
    assert board.route(pending_one(board), [agent("ann", ["python"]), agent("bob")]) is None


def test_best_skill_match_routes_unassigned_tasks(hive: Hive, board: TaskBoard) -> None:
    drop(hive, "a.md", "---\ndomain: frontend\n---\n# Fix CSS of the login page\n\nWrite tests.\n")
    agents = [agent("py", ["python", "test"]), agent("web", ["frontend", "css"]), agent("any")]
    assert board.route(pending_one(board), agents) == "web"


def test_without_a_skill_match_the_least_loaded_open_agent_gets_it(
    hive: Hive, board: TaskBoard
) -> None:
    drop(hive, "a.md", "# Something else\n")
    agents = [agent("busy"), agent("closed", accepts=False), agent("idle")]
    ref = pending_one(board)
    assert board.route(ref, agents, {"busy": 3, "idle": 1, "closed": 0}) == "idle"
    assert board.route(ref, [agent("closed", accepts=False)], {}) is None


def test_claimable_for_orders_by_priority_then_age(hive: Hive, board: TaskBoard) -> None:
    now = time.time()
    for i, (name, priority) in enumerate(
        [("old-low", "low"), ("old-high", "high"), ("new-high", "high"), ("crit", "critical")]
    ):
        path = drop(hive, f"{name}.md", f"---\npriority: {priority}\n---\n# {name}\n")
        os.utime(path, (now - 100 + i, now - 100 + i))
    ids = [r.id for r in board.claimable_for("ann", [agent("ann")])]
    assert ids == ["crit", "old-high", "new-high", "old-low"]


def test_find_and_counts_follow_the_task_across_states(hive: Hive, board: TaskBoard) -> None:
    ref = board.create(Task(id="t", body="x"))
    assert board.find("t").state is TaskState.PENDING  # type: ignore[union-attr]
    claimed = board.claim(ref, "ann")
    found = board.find("t")
    assert found is not None and (found.state, found.agent) == (TaskState.ACTIVE, "ann")
    board.complete(claimed, "ok", "ann")  # type: ignore[arg-type]
    assert board.find("t").state is TaskState.DONE  # type: ignore[union-attr]
    assert board.find("missing") is None
    counts = board.counts()
    assert counts[TaskState.DONE] == 1 and counts[TaskState.PENDING] == 0
