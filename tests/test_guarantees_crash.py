"""A killed daemon loses nothing and repeats nothing a person would see twice (DESIGN §3).

The short version of `bench/crash_harness.py` (SIGKILL at seeded random
moments, restart, check every task, message and audit record), and the bugs
it found, each pinned by a test that stops the work at the exact point.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.crash_harness import run_crash
from hivemind.agent.audit import AuditLog
from hivemind.agent.cycle import Agent
from hivemind.agent.services import HiveServices
from hivemind.hive import tasks as tasks_module
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.hive.tasks import TaskBoard
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


async def test_a_crash_between_writing_the_result_and_the_move_gives_one_result(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    claimed(hive, "t1")
    monkeypatch.setattr(tasks_module, "move_into", crash_once(tasks_module.move_into))

    with pytest.raises(Crash):
        await complete(hive)
    content, is_error = await complete(hive)

    assert not is_error, content
    assert not list(hive.active_dir_for("worker").glob("*.md"))
    assert (hive.done_dir / "t1.md").read_text().count("## Result") == 1


def test_a_torn_last_audit_line_does_not_swallow_the_next_record(hive: Hive) -> None:
    log = AuditLog(hive.audit_path("worker"))
    log.append("cycle_start", cycle=1, tasks=["t1"], mail=[])
    with open(log.path, "a", encoding="utf-8") as fh:  # killed in the middle of a long write
        fh.write(json.dumps({"event": "cycle", "cycle": 1, "kept": ["x" * 50]})[:40])

    fresh = AuditLog(hive.audit_path("worker"))
    assert fresh.mark_interrupted() == [1]
    fresh.append("cycle_start", cycle=2, tasks=[], mail=[])

    events = [(r["event"], r["cycle"]) for r in AuditLog(log.path).records()]
    assert events == [("cycle_start", 1), ("interrupted", 1), ("cycle_start", 2)]
