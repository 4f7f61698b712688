"""A killed daemon loses nothing and repeats nothing a person would see twice (DESIGN §3).

The short version of `bench/crash_harness.py` (SIGKILL at seeded random
moments, restart, check every task, message and audit record), and the bugs
it found, each pinned by a test that stops the work at the exact point.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from bench.crash_harness import run_crash
from hivemind.agent.audit import AuditLog
from hivemind.agent.cycle import Agent
from hivemind.agent.record import CycleStart
from hivemind.agent.services import HiveServices
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.hive.models import TaskState
from hivemind.hive.tasks import ending
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.base import ToolCall
from hivemind.llm.offline import OfflineProvider
from hivemind.tools import default_registry
from tests.helpers import fast_config, write_agent, write_task
from tests.test_tools import make_ctx


class Crash(BaseException):
    """Stands for SIGKILL at this point: nothing after it runs, nothing catches it."""


def crash_once(real: Any) -> Any:
    state = {"crashed": False}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not state["crashed"]:
            state["crashed"] = True
            raise Crash
        return real(*args, **kwargs)

    return wrapper


def claimed(hive: Hive, stem: str, front: str = "") -> None:
    write_task(hive, stem, front=front)
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.scan_pending()
    assert board.claim(ref, "worker") is not None


async def complete(hive: Hive, task_id: str = "t1") -> tuple[str, bool]:
    """complete_task as a fresh daemon would run it (new board, new post office)."""
    ctx = make_ctx(hive)
    result = await default_registry().execute(
        ctx, ToolCall(id="c1", name="complete_task", input={"task_id": task_id, "result": "ok"})
    )
    return result.content, result.is_error


def notices(hive: Hive) -> list[str]:
    return [m.message.subject for m in Mailbox(hive, HUMAN).unread()
            if m.message.subject.startswith("[done]")]


# -- the harness, short ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "tasks", "kills"), [("offline", 40, 6), ("anthropic", 16, 3)], ids=["offline", "api"]
)
def test_sigkill_at_random_moments_loses_and_duplicates_nothing(
    tmp_path: Path, mode: str, tasks: int, kills: int
) -> None:
    result = run_crash(tmp_path / "hive", tasks=tasks, agents=3, kills=kills, seed=11, mode=mode,
                       reply_delay=0.05, timeout=150)

    assert result.problems == []
    assert result.kills == kills
    assert result.counts["tasks_done_once"] == result.counts["results_ok"] == tasks
    assert result.interrupted_records == result.open_cycles_at_kills


# -- bugs the harness found -----------------------------------------------------------


async def test_mail_read_in_one_cycle_is_not_answered_again_in_the_next(hive: Hive) -> None:
    write_agent(hive, "worker")
    PostOffice(hive).send(HUMAN, "worker", "Question", "Are you there?")
    services = HiveServices.open(hive, OfflineProvider(), fast_config(hive))
    agent = Agent("worker", services)
    await agent.cycle()
    claimed(hive, "later")
    await agent.cycle()  # a new task wakes the agent; the old mail is read by now

    replies = [m for m in Mailbox(hive, HUMAN).unread() if "Re: Question" in m.message.subject]
    assert len(replies) == 1


@pytest.mark.parametrize(
    "where", ["send_steps", "complete_steps"], ids=["at-the-notice", "at-the-move"]
)
async def test_a_crash_inside_complete_task_gives_exactly_one_notice(
    hive: Hive, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    claimed(hive, "t1", front=f"reply_to: {HUMAN}\n")
    target = PostOffice if where == "send_steps" else TaskBoard
    monkeypatch.setattr(target, where, crash_once(getattr(target, where)))

    with pytest.raises(Crash):
        await complete(hive)
    content, is_error = await complete(hive)  # the restarted daemon redoes the cycle

    assert not is_error, content
    assert notices(hive) == ["[done] t1"]
    assert (hive.done_dir / "t1.md").read_text().count("## Result") == 1


async def test_a_crash_before_the_claimed_copy_is_removed_is_finished_at_restart(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    claimed(hive, "t1")
    monkeypatch.setattr(ending, "_remove", crash_once(ending._remove))

    with pytest.raises(Crash):
        await complete(hive)
    # Killed after the finished version was linked into done/: both copies are there.
    assert (hive.active_dir_for("worker") / "t1.md").exists()
    assert (hive.done_dir / "t1.md").exists()

    services = HiveServices.open(hive, OfflineProvider(), fast_config(hive))
    Agent("worker", services).recover()  # what the restarted daemon does first

    assert not list(hive.active_dir_for("worker").glob("*.md"))
    assert services.board.active("worker") == []
    assert (hive.done_dir / "t1.md").read_text().count("## Result") == 1


def test_restart_keeps_a_claimed_task_whose_id_was_done_before(hive: Hive) -> None:
    """A copy claimed after its finished twin was done is new work, not a leftover (the
    board refuses a dropped duplicate id; a copy put into active/ by hand is kept)."""
    claimed(hive, "t1")
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.active("worker")
    text = ref.path.read_text()
    board.complete(ref, "first time", "worker")
    time.sleep(0.02)  # past the coarse clock's tick
    (hive.active_dir_for("worker") / "t1.md").write_text(text)

    assert TaskBoard(hive, settle_time=0).retire_finished("worker") == []
    assert (hive.active_dir_for("worker") / "t1.md").exists()


@pytest.mark.parametrize("change", ["other agent", "other text", "not done"])
def test_restart_keeps_a_claimed_task_unless_done_has_its_finished_version(
    hive: Hive, change: str
) -> None:
    claimed(hive, "t1")
    agent = "someone" if change == "other agent" else "worker"
    body = "Another thing." if change == "other text" else "Do the thing."
    status = "failed" if change == "not done" else "done"
    (hive.done_dir / "t1.md").write_text(
        f"---\nid: t1\nstatus: {status}\nagent: {agent}\n"
        "finished_at: 2099-01-01T00:00:00+00:00\n---\n"
        f"# t1\n\n{body}\n\n## Result\n\nok\n"
    )

    assert TaskBoard(hive, settle_time=0).retire_finished("worker") == []
    assert (hive.active_dir_for("worker") / "t1.md").exists()


async def test_a_claimed_task_already_marked_done_keeps_both_results(hive: Hive) -> None:
    """A claimed file that already says done (a person moved a done task back to have it
    redone; or an early version's crash) is completed again: its earlier result stays,
    the new one follows, and it moves to done/."""
    claimed(hive, "t1")
    (hive.active_dir_for("worker") / "t1.md").write_text(
        "---\nid: t1\nstatus: done\nagent: worker\n"
        "finished_at: 2026-01-01T00:00:00+00:00\n---\n# t1\n\n## Result\n\nfirst\n"
    )

    content, is_error = await complete(hive)

    assert not is_error, content
    assert not list(hive.active_dir_for("worker").glob("*.md"))
    text = (hive.done_dir / "t1.md").read_text()
    assert text.count("## Result") == 2 and text.index("first") < text.rindex("## Result")
    assert "finished_at: 2026-01-01" not in text


async def test_a_finished_task_whose_copy_cannot_be_removed_is_listed_nowhere(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claimed copy stays hidden until the next start removes it."""
    claimed(hive, "t1")
    ctx = make_ctx(hive)
    board = ctx.board
    assert isinstance(board, TaskBoard)

    # Removal refused (say, a folder made read-only under the daemon).
    monkeypatch.setattr(ending, "_remove", lambda path: False)
    result = await default_registry().execute(
        ctx, ToolCall(id="c1", name="complete_task", input={"task_id": "t1", "result": "ok"})
    )
    assert not result.is_error, result.content
    assert (hive.active_dir_for("worker") / "t1.md").exists()  # still there ...
    assert board.active("worker") == []  # ... but listed nowhere
    assert board.find("t1").state is TaskState.DONE  # type: ignore[union-attr]
    assert board.load().get("worker", 0) == 0
    monkeypatch.undo()
    # The next start tidies it: one finished version, nothing active.
    assert TaskBoard(hive).retire_finished("worker") == ["t1"]
    assert not (hive.active_dir_for("worker") / "t1.md").exists()


def test_a_torn_last_audit_line_does_not_swallow_the_next_record(hive: Hive) -> None:
    log = AuditLog(hive.audit_path("worker"))
    log.append(CycleStart(cycle=1, tasks=["t1"], mail=[]))
    with open(log.path, "a", encoding="utf-8") as fh:  # killed in the middle of a long write
        fh.write(json.dumps({"event": "cycle", "cycle": 1, "kept": ["x" * 50]})[:40])

    fresh = AuditLog(hive.audit_path("worker"))
    assert fresh.mark_interrupted() == [1]
    fresh.append(CycleStart(cycle=2, tasks=[], mail=[]))

    events = [(r.event, r.cycle) for r in AuditLog(log.path).records()]
    assert events == [("cycle_start", 1), ("interrupted", 1), ("cycle_start", 2)]
