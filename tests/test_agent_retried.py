"""A retried task's ceilings count from its retry: tokens per task, its track."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from hivemind.agent.audit import AuditLog
from hivemind.agent.budget import BudgetTracker
from hivemind.agent.followup import HeldWork
from hivemind.agent.record import read_record
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive import steering
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive
from hivemind.llm.base import ModelRequest, ModelResponse, Usage
from tests.helpers import fast_config, run_until_idle, until, write_agent, write_task

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def write_cycles(log: AuditLog, *cycles: tuple[datetime, int]) -> None:
    log.path.parent.mkdir(parents=True, exist_ok=True)
    with log.path.open("a") as fh:
        for at, tokens in cycles:
            fh.write(json.dumps({"event": "cycle", "at": at.isoformat(), "tasks": ["t1"],
                                 "usage": {"input_tokens": tokens}}) + "\n")


def test_a_retried_task_counts_its_tokens_from_zero_again() -> None:
    budget = BudgetTracker(per_task={"t1": 50_000, "t2": 10})

    assert budget.restart_retried({"t1": T0, "t2": None}) == ["t1"]
    assert budget.per_task == {"t2": 10}
    budget.record(300, ["t1"])
    assert budget.restart_retried({"t1": T0}) == []  # the same retry: counted on
    assert budget.per_task["t1"] == 300
    assert budget.restart_retried({"t1": T0 + timedelta(hours=1)}) == ["t1"]  # retried again
    assert "t1" not in budget.per_task


def test_after_a_restart_a_retried_task_counts_only_the_tokens_since_its_retry(
    hive: Hive,
) -> None:
    log = AuditLog(hive.audit_path("worker"), fsync=False)
    write_cycles(log, (T0 - timedelta(hours=2), 1_000), (T0 + timedelta(minutes=5), 70))

    _, everything = log.usage_since(T0 - timedelta(days=1))
    _, since_retry = log.usage_since(T0 - timedelta(days=1), {"t1": T0})

    assert everything == {"t1": 1_070}
    assert since_retry == {"t1": 70}


def test_after_a_restart_a_retried_task_does_not_take_back_its_old_track() -> None:
    before = {"event": "cycle", "at": (T0 - timedelta(hours=1)).isoformat(),
              "held": {"t1": {"attempt": 0, "idle": 1, "rounds": 99}}}
    after = {"event": "cycle", "at": (T0 + timedelta(minutes=1)).isoformat(),
             "held": {"t2": {"attempt": 0, "idle": 1, "rounds": 4}}}
    held = HeldWork()

    records = [r for r in map(read_record, (before, after)) if r is not None]
    held.restore(records, {"t1": 0, "t2": 0}, retried={"t1": T0})

    assert "t1" not in held.tracks  # its 99 rounds were the failed run's
    assert held.tracks["t2"].rounds == 4


class Talker:
    """A model that answers in plain text, spending 800 tokens a call: a task it holds
    reaches a per-task budget of 1,000 at its second call."""

    name = "talker"
    offline = True

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        return ModelResponse(text="Thinking it over.", stop_reason="end_turn",
                             usage=Usage(input_tokens=800), model="talker", provider="talker")

    async def aclose(self) -> None:
        pass


def spent_on_budget(hive: Hive) -> str:
    return read_task(hive.failed_dir / "t1.md").body


def test_a_task_failed_on_its_token_budget_is_worked_on_again_once_retried(
    hive: Hive,
) -> None:
    write_agent(hive, "worker", front="budget: {per_task: 1000}\nmax_idle_turns: 9\n")
    write_task(hive, "t1")
    model = Talker()
    run_until_idle(hive, model)
    assert "token budget per task spent" in spent_on_budget(hive)
    calls = model.calls

    steering.retry(hive, "t1")
    run_until_idle(hive, model)  # a new daemon: the count is restored from the audit log

    assert model.calls == calls + 2  # worked on again, up to its budget again
    assert spent_on_budget(hive).count("token budget per task spent") == 2


async def test_a_task_retried_while_the_daemon_runs_starts_its_count_again(
    hive: Hive,
) -> None:
    write_agent(hive, "worker", front="budget: {per_task: 1000}\nmax_idle_turns: 9\n")
    write_task(hive, "t1")
    model = Talker()
    daemon = Daemon(hive, fast_config(hive), model, RunOptions())
    running = asyncio.ensure_future(daemon.run())
    try:
        await until((hive.failed_dir / "t1.md").exists, "t1 fails on its budget")
        calls = model.calls
        steering.retry(hive, "t1")
        await until(lambda: (hive.failed_dir / "t1.md").exists()
                    and spent_on_budget(hive).count("per task spent") == 2, "t1 fails again")
        assert model.calls == calls + 2
    finally:
        daemon.stop("signal")
        await running
