"""Audit records are written and read through the same models, old lines included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivemind.agent.audit import AuditLog, parse_record
from hivemind.agent.record import (
    BudgetNotice,
    CycleRecord,
    CycleStart,
    DroppedEntry,
    EffectsRecord,
    Interrupted,
    KeptEntry,
    OtherRecord,
    Reflection,
    ToolCallRecord,
    TrackRecord,
)
from hivemind.llm.base import Usage

# A cycle line as an earlier version wrote it: no held, ended, stop_reason or timings,
# fewer effects and usage keys, and a field this version does not know.
OLD_CYCLE = (
    '{"event": "cycle", "at": "2026-11-20T08:00:00+00:00", "cycle": 7, "agent": "worker", '
    '"provider": "offline", "tasks": ["t1"], "mail": [], '
    '"kept": [{"id": "task:t1", "tokens": 40}], "dropped": [], "context_tokens": 40, '
    '"usage": {"input_tokens": 30, "output_tokens": 5}, "cost": null, '
    '"tool_calls": [{"name": "complete_task", "input": {"task_id": "t1"}, "result": "ok", '
    '"error": false}], "text": "Done.", '
    '"effects": {"messages_sent": [], "tasks_completed": ["t1"]}, "error": null, '
    '"duration_ms": 3.5, "retired_field": 1}'
)


def a_cycle() -> CycleRecord:
    return CycleRecord(
        cycle=3, agent="worker", provider="offline", tasks=["t1"], mail=["m1"],
        kept=[KeptEntry(id="task:t1", tokens=12)],
        dropped=[DroppedEntry(id="file:big.md", reason="over budget", tokens=900)],
        context_tokens=12, usage=Usage(input_tokens=10, output_tokens=2), cost=None,
        tool_calls=[ToolCallRecord(name="write_file", input={"path": "w/a.md"},
                                   result="written", error=False)],
        text="Wrote it.",
        effects=EffectsRecord(files_written=["workspace/a.md"], waits={"t1": "an answer"}),
        followup=["t1"], held={"t1": TrackRecord(attempt=1, rounds=2, asked=["ann"])},
        error=None, stop_reason="end_turn", ended=None,
        duration_ms=4.2, model_ms=1.0, tools_ms=0.5,
    )


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(a_cycle(), id="cycle"),
        pytest.param(CycleStart(cycle=4, tasks=["t1"], mail=[]), id="cycle-start"),
        pytest.param(Interrupted(cycle=4, started_at="2026-11-20T08:00:00+00:00",
                                 tasks=["t1"], mail=["m1"]), id="interrupted"),
        pytest.param(BudgetNotice(cycle=5, warned="task:t1"), id="budget"),
        pytest.param(Reflection(cycle=6, written=[{"id": "r1", "content": "x"}]),
                     id="reflection"),
        pytest.param(OtherRecord(event="note", cycle=1, text="café"), id="unknown-kind"),
    ],
)
def test_a_record_written_reads_back_equal(tmp_path: Path, record: CycleRecord) -> None:
    log = AuditLog(tmp_path / "a.jsonl", fsync=False)
    log.write(record)
    [read] = list(log.records())
    assert type(read) is type(record)
    assert read == record


def test_a_cycle_line_of_an_earlier_version_still_reads() -> None:
    rec = parse_record(OLD_CYCLE)
    assert isinstance(rec, CycleRecord)
    assert (rec.cycle, rec.tasks, rec.tokens) == (7, ["t1"], 35)
    assert rec.ended_tasks == {"t1"}
    assert rec.held == {} and rec.tools_ms is None  # missing: the defaults
    assert rec.tool_calls[0].input == {"task_id": "t1"}
    assert rec.as_json() == json.loads(OLD_CYCLE)  # shown as the file holds it


@pytest.mark.parametrize(
    "line",
    [
        pytest.param('{"event": "cycle", "cycle": 1, "tasks": "t1"}', id="wrong-type"),
        pytest.param('{"event": "cycle", "usage": {"input_tokens": -5}}', id="out-of-range"),
        pytest.param('{"event": "cyc', id="torn"),
        pytest.param("[1, 2]", id="not-an-object"),
    ],
)
def test_a_line_that_fits_no_record_is_skipped(tmp_path: Path, line: str) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(line + "\n" + '{"event": "cycle_start", "cycle": 2}\n')
    assert [(r.event, r.cycle) for r in AuditLog(path, fsync=False).records()] == [
        ("cycle_start", 2)]


def test_the_line_holds_the_keys_the_cycle_wrote_before(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl", fsync=False)
    log.write(a_cycle())
    line = json.loads((tmp_path / "a.jsonl").read_text())
    assert list(line) == [
        "event", "at", "cycle", "agent", "provider", "tasks", "mail", "kept", "dropped",
        "context_tokens", "usage", "cost", "tool_calls", "text", "effects", "followup",
        "held", "error", "stop_reason", "ended", "duration_ms", "model_ms", "tools_ms",
    ]
    assert line["usage"] == {"input_tokens": 10, "output_tokens": 2,
                             "cache_write_tokens": 0, "cache_read_tokens": 0}
    assert list(line["effects"]) == [
        "messages_sent", "files_written", "tasks_created", "tasks_completed", "tasks_failed",
        "memories", "waits", "refusals", "delegated"]
