"""A retried task's ceilings count from its retry: tokens per task, its track."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hivemind.agent.audit import AuditLog
from hivemind.agent.budget import BudgetTracker
from hivemind.agent.followup import HeldWork
from hivemind.agent.record import read_record
from hivemind.hive.layout import Hive

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
