"""`hivemind log [AGENT] [--agent A] [-f] [--since WHEN] [--json] [-n N]`: what the agents
did, interleaved by time, one line an event."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from hivemind.agent.audit import AuditLog
from hivemind.agent.audittail import Position, read_new
from hivemind.agent.record import read_record
from hivemind.cli import log_cmd
from hivemind.hive.layout import Hive
from tests.helpers import run_until_idle, write_agent, write_task

ROOT = Path(__file__).resolve().parent.parent
WAIT = 30.0  # seconds any wait may take on a busy machine before the test gives up


@pytest.fixture
def app() -> typer.Typer:
    """A `hivemind` app with the log command (a group, as with every command loaded)."""
    cli = typer.Typer(add_completion=False)

    @cli.callback()
    def root() -> None:
        """hivemind"""

    log_cmd.register(cli)
    return cli


@pytest.fixture
def ran(hive: Hive) -> Hive:
    """A hive after a real (offline) run: worker did t1 in one cycle with three tool calls."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    run_until_idle(hive)
    return hive


def log(app: typer.Typer, hive: Hive, *args: str) -> Result:
    return CliRunner().invoke(app, ["log", *args, "--hive", str(hive.root)])


def what(line: str) -> str:
    """A line without its time, agent and task columns: what happened."""
    return line[8 + 1 + len("worker") + 1 + 16 + 1:].rstrip()


def columns(line: str) -> list[str]:
    """Time, agent and task of a line."""
    return line.split()[:3]


def _new_records(path: Path, at: Position) -> tuple[list[dict[str, Any]], Position]:
    read = read_new(path, at)
    return read.records, read.at


def put(audit: AuditLog, event: str, **fields: Any) -> None:
    """Write a record as the runtime does, from its event and fields."""
    record = read_record({"event": event, **fields})
    assert record is not None, fields
    audit.write(record)


def records_in(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_bytes(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def line_of(**record: Any) -> bytes:
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()


# -- the command ------------------------------------------------------------------


def test_a_real_run_prints_one_line_an_event_with_time_agent_and_task(
    app: typer.Typer, ran: Hive
) -> None:
    start, cycle = records_in(ran.audit_path("worker"))
    assert (start["event"], cycle["event"]) == ("cycle_start", "cycle")
    calls = cycle["tool_calls"]
    assert [c["name"] for c in calls] == ["send_message", "write_file", "complete_task"]

    result = log(app, ran, "worker")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # No record wrapped over two lines: the start, what the model said, each call, the
    # turn's end with no closing model call (its last task ended), the cycle's figures.
    assert len(lines) == 1 + 1 + len(calls) + 2, result.output
    for line in lines:
        stamp, agent, task = columns(line)
        assert re.fullmatch(r"\d\d:\d\d:\d\d", stamp) and (agent, task) == ("worker", "t1")
    assert what(lines[0]) == "#1 start: 1 task, no new mail"
    assert what(lines[1]) == f"said {cycle['text']}"
    for line, call in zip(lines[2:-2], calls, strict=True):
        assert what(line).startswith(f"✓ {call['name']} "), line
        assert line.endswith(f" → {call['result']}"), line
    # the arguments shortened, "[offline]" and all (not eaten as console markup)
    assert 'subject="[offline] Ack: t1" body="Automatic acknowledgement from the offl…"' in lines[2]
    assert "path=workspace/t1.md" in lines[3]
    assert what(lines[-2]) == "turn over: last task ended (no closing model call)"
    tokens = sum(cycle["usage"].values())
    assert what(lines[-1]).startswith(f"#1 end: 3 tool calls, {tokens:,} tokens, ")
    assert what(lines[-1]).endswith("ms, context 2 kept, 0 dropped")
    assert "$" not in lines[-1]  # the offline provider's cycle has no cost (not "None")


def test_failed_calls_errors_and_other_events_stay_one_line_each_and_verbatim(
    app: typer.Typer, hive: Hive
) -> None:
    write_agent(hive, "worker")
    audit = AuditLog(hive.audit_path("worker"), fsync=False)
    put(audit, "cycle", cycle=3, tasks=["t1"], kept=[], dropped=[], usage={"input_tokens": 5},
                cost=0.25, duration_ms=7, error="model said [/bold] no\nat all",
                tool_calls=[{"name": "read_file", "input": {"path": "notes.md"},
                             "result": "line one\nline [red]two[/red]", "error": True}])
    put(audit, "reflection", cycle=4, error="store is locked")

    result = log(app, hive, "worker")
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [what(line) for line in result.output.splitlines()]
    assert lines == [
        "✗ read_file path=notes.md → line one line [red]two[/red]",
        "error: model said [/bold] no at all",
        "#3 end: 1 tool call, 5 tokens, $0.2500, 7 ms, context 0 kept, 0 dropped",
        "reflection #4 error=store is locked",
    ], result.output


def test_what_the_model_said_its_refusals_and_follow_ups_are_shown(
    app: typer.Typer, hive: Hive
) -> None:
    """A text answer was only in `log --json`; now it, and what held work got, reads here."""
    write_agent(hive, "worker")
    audit = AuditLog(hive.audit_path("worker"), fsync=False)
    put(audit, "cycle", cycle=2, kept=[], dropped=[], usage={}, tool_calls=[],
                text="The answer\nis 42.", followup=["t1"],
                effects={"refusals": ["refused: max_delegation_depth=5"]})

    lines = [what(line) for line in log(app, hive, "worker").output.splitlines()]
    assert lines[:3] == ["said The answer is 42.", "refused refused: max_delegation_depth=5",
                         "follow-up held work waits on nothing: another cycle at once"]


def test_a_long_text_is_shortened_to_one_line(app: typer.Typer, hive: Hive) -> None:
    write_agent(hive, "worker")
    put(AuditLog(hive.audit_path("worker"), fsync=False),
        "cycle", cycle=1, text="word " * 500, tool_calls=[
            {"name": "write_file", "input": {"path": "workspace/a.md", "content": "x\n" * 900},
             "result": "wrote workspace/a.md (1800 bytes)"}])
    said, call = [what(line) for line in log(app, hive, "worker").output.splitlines()][:2]
    assert said.startswith("said word word") and said.endswith("…") and len(said) < 220
    assert call.startswith('✓ write_file path=workspace/a.md content="x x x') and len(call) < 200


def test_long_term_memory_use_of_a_cycle_is_shown(app: typer.Typer, hive: Hive) -> None:
    """Memories put into the context, a recall and what a task's end learned: before,
    only --json showed them."""
    write_agent(hive, "worker")
    audit = AuditLog(hive.audit_path("worker"), fsync=False)
    put(audit, "cycle", cycle=1, kept=[], dropped=[], usage={}, tool_calls=[], effects={
        "memories": [
            {"op": "context", "query": "launch window", "results": [
                {"id": "m-1", "score": 0.81}, {"id": "m-2", "score": 0.5}]},
            {"op": "context", "query": "nothing here", "results": []},
            {"op": "recall", "query": "apollo", "results": []},
            {"op": "end_task", "task_id": "t1", "consolidated": ["m-3"], "promoted": [],
             "cleared": ["m-4", "m-5"], "value_updates": {"m-1": [0.5, 0.6]}, "pruned": []},
        ]})  # fmt: skip

    lines = [what(line) for line in log(app, hive, "worker").output.splitlines()]

    assert lines[:-1] == [
        "memory in the context: m-1 (0.81), m-2 (0.50) (for 'launch window')",
        "memory recalled: nothing (for 'apollo')",
        "memory task t1 ended: 1 consolidated, 2 cleared, 1 values learned",
    ]


def test_budget_and_rom_records_read_as_sentences(app: typer.Typer, hive: Hive) -> None:
    write_agent(hive, "worker")
    audit = AuditLog(hive.audit_path("worker"), fsync=False)
    put(audit, "budget", cycle=2, warned="task:t1")
    put(audit, "budget", cycle=3, warned="day:2026-11-23")
    put(audit, "config_error", cycle=3, error="agents/worker/ROM.md: line 2: max_steps must "
                "be ≥ 1 (got 0)")
    put(audit, "config_fixed", cycle=4)

    lines = log(app, hive, "worker").output.splitlines()

    assert columns(lines[0])[2] == "t1"
    assert [what(line) for line in lines] == [
        "budget task t1 stopped: its token budget is spent (human was told)",
        "budget paused: its daily token budget for 2026-11-23 is spent (human was told)",
        "ROM error agents/worker/ROM.md: line 2: max_steps must be ≥ 1 (got 0)",
        "ROM fixed",
    ]


def test_an_interrupted_cycle_reads_as_a_sentence(app: typer.Typer, hive: Hive) -> None:
    """It was printed as a raw dict: `#52 interrupted {'started_at': ..., 'tasks': [...]}`."""
    write_agent(hive, "worker")
    audit = AuditLog(hive.audit_path("worker"), fsync=False)
    put(audit, "interrupted", cycle=4, started_at="2026-11-23T08:19:35.123456+00:00",
                tasks=["t205", "t206"], mail=["m1"])
    put(audit, "interrupted", cycle=5, started_at="2026-11-23T09:00:00+00:00",
                tasks=["t9"], mail=[])
    put(audit, "interrupted", cycle=6, tasks=[], mail=[])

    lines = log(app, hive, "worker").output.splitlines()

    assert lines[0].endswith("interrupted #4 the cycle started 2026-11-23T08:19:35 never ended "
                             "(the daemon stopped or was killed mid-cycle); its tasks t205, t206 "
                             "and mail m1 were left for the next run")
    assert lines[1].endswith("interrupted #5 the cycle started 2026-11-23T09:00:00 never ended "
                             "(the daemon stopped or was killed mid-cycle); its task t9 was left "
                             "for the next run")
    assert lines[2].endswith("interrupted #6 the cycle never ended (the daemon stopped or was "
                             "killed mid-cycle)")


def test_json_prints_each_record_as_the_file_holds_it_with_its_agent(
    app: typer.Typer, ran: Hive
) -> None:
    result = log(app, ran, "worker", "--json")
    assert result.exit_code == 0, result.output
    printed = [json.loads(line) for line in result.output.splitlines()]
    assert printed == [{**r, "agent": "worker"} for r in records_in(ran.audit_path("worker"))]


def test_last_n_shows_only_the_last_n_records(app: typer.Typer, hive: Hive) -> None:
    write_agent(hive, "worker")
    audit = AuditLog(hive.audit_path("worker"), fsync=False)
    for n in range(1, 6):
        put(audit, "reflection", cycle=n)

    def cycles(*args: str) -> list[int]:
        result = log(app, hive, "worker", "--json", *args)
        assert result.exit_code == 0, result.output
        return [json.loads(line)["cycle"] for line in result.output.splitlines()]

    assert cycles("--last", "2") == [4, 5]
    assert cycles("-n", "1") == [5]
    assert cycles("-n", "9") == [1, 2, 3, 4, 5]
    assert cycles() == [1, 2, 3, 4, 5]
    assert cycles("-n", "0") == []  # nothing old: with --follow, only what comes next
    assert log(app, hive, "worker", "-n", "-1").exit_code != 0


def test_n_0_prints_nothing_not_that_there_are_no_records(app: typer.Typer, hive: Hive) -> None:
    """It said "no audit records for worker yet" of an agent that had some."""
    write_agent(hive, "worker")
    put(AuditLog(hive.audit_path("worker"), fsync=False), "reflection", cycle=1)
    result = log(app, hive, "worker", "-n", "0")
    assert (result.exit_code, result.output) == (0, "")


def test_an_unknown_agent_is_one_line_naming_the_agents(app: typer.Typer, hive: Hive) -> None:
    write_agent(hive, "worker")
    write_agent(hive, "helper")
    result = log(app, hive, "nobody")
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    text = result.output.strip()
    assert "\n" not in text and "Traceback" not in text, text
    assert text.startswith("error: no agent 'nobody'") and "(agents: helper, worker)" in text


@pytest.mark.parametrize("name", ["../outside", ".hidden", "a/b"])
def test_a_path_is_no_agent_name(app: typer.Typer, hive: Hive, name: str) -> None:
    """A trail is read from the audit folder only, whatever .jsonl lies elsewhere."""
    write_agent(hive, "worker")
    target = hive.audit_path(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text('{"event": "cycle_start", "cycle": 1}\n')
    result = log(app, hive, name)
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"error: no agent {name!r}")


# -- following: the reader of new records -----------------------------------------


def test_new_records_are_read_once_each_from_where_the_last_read_ended(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    assert _new_records(path, Position()) == ([], Position())  # no file
    audit = AuditLog(path, fsync=False)
    put(audit, "reflection", cycle=1)
    put(audit, "reflection", cycle=2)
    records, at = _new_records(path, Position())
    assert [r.cycle for r in records] == [1, 2]
    assert at.offset == path.stat().st_size
    assert _new_records(path, at) == ([], at)
    put(audit, "reflection", cycle=3)
    records, at = _new_records(path, at)
    assert [r.cycle for r in records] == [3]


def test_a_line_still_being_written_is_read_once_it_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    first, second = line_of(event="reflection", cycle=1), line_of(event="note", text="café")
    cut = second.index("é".encode()) + 1  # inside the two bytes of "é", too
    append_bytes(path, first + second[:cut])
    records, at = _new_records(path, Position())
    assert [r.as_json() for r in records] == [{"event": "reflection", "cycle": 1}]
    assert at.offset == len(first)  # the partial tail is left for the next read
    assert _new_records(path, at) == ([], at)
    append_bytes(path, second[cut:])
    records, at = _new_records(path, at)
    assert [r.as_json() for r in records] == [{"event": "note", "text": "café"}]
    assert at.offset == len(first) + len(second)


def test_a_file_that_shrank_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    append_bytes(path, line_of(event="reflection", cycle=1) + line_of(event="reflection", cycle=2))
    _, at = _new_records(path, Position())
    path.write_bytes(line_of(event="reflection", cycle=9))  # truncated and rewritten, shorter
    records, at = _new_records(path, at)
    assert [r.cycle for r in records] == [9]
    assert at.offset == path.stat().st_size


def test_a_replaced_file_is_read_from_its_start_even_if_it_is_longer(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    append_bytes(path, line_of(event="reflection", cycle=1))
    _, at = _new_records(path, Position())
    new = tmp_path / "new.jsonl"
    new.write_bytes(line_of(event="reflection", cycle=7, pad="x" * 200)
                    + line_of(event="reflection", cycle=8))
    os.replace(new, path)
    records, at = _new_records(path, at)
    assert [r.cycle for r in records] == [7, 8]
    assert _new_records(path, at) == ([], at)


def test_bad_lines_are_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    append_bytes(path, line_of(event="reflection", cycle=1) + b"not json\n" + b"[1, 2]\n"
                 + b"\xff\xfe{\n" + b"\n" + line_of(event="reflection", cycle=2))
    records, at = _new_records(path, Position())
    assert [r.cycle for r in records] == [1, 2]
    append_bytes(path, b"{broken\n" + line_of(event="reflection", cycle=3))
    records, at = _new_records(path, at)
    assert [r.cycle for r in records] == [3]
    assert at.offset == path.stat().st_size


# -- following, end to end ---------------------------------------------------------


def test_follow_prints_new_records_even_one_written_in_two_parts_and_ctrl_c_ends_it(
    ran: Hive,
) -> None:
    path = ran.audit_path("worker")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ANTHROPIC_") and k != "PYTHONUNBUFFERED"}  # a pipe, as in `| jq`
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hivemind", "log", "worker", "--follow", "--json",
         "--hive", str(ran.root)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    lines: queue.Queue[bytes] = queue.Queue()

    def read_lines() -> None:
        for line in proc.stdout or ():
            lines.put(line)

    threading.Thread(target=read_lines, daemon=True).start()

    def next_record() -> dict[str, Any]:
        try:
            record: dict[str, Any] = json.loads(lines.get(timeout=WAIT))
            return record
        except queue.Empty:
            proc.kill()
            raise AssertionError(f"nothing printed in {WAIT} s") from None

    try:
        old = [{**r, "agent": "worker"} for r in records_in(path)]
        assert [next_record() for _ in old] == old
        put(AuditLog(path, fsync=False), "reflection", cycle=2, note="appended")
        assert next_record()["note"] == "appended"  # printed as it came: not held in a buffer
        whole = line_of(event="reflection", cycle=3, note="in two parts")
        append_bytes(path, whole[:20])
        time.sleep(1.2)  # lets the follower look at the half line (a chance, not a check)
        append_bytes(path, whole[20:])
        assert next_record() == {**json.loads(whole), "agent": "worker"}
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=WAIT)
        err = proc.stderr.read() if proc.stderr else b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err.decode()


def test_an_agent_that_never_ran_has_a_line_saying_so(app: typer.Typer, hive: Hive) -> None:
    write_agent(hive, "worker")
    result = log(app, hive, "worker")
    assert result.exit_code == 0, result.output
    assert result.output == "no audit records for worker yet (.hivemind/audit/worker.jsonl)\n"


def test_json_of_an_agent_that_never_ran_is_no_line_at_all(app: typer.Typer, hive: Hive) -> None:
    write_agent(hive, "worker")
    result = log(app, hive, "worker", "--json")  # JSON lines, one a record: none, no line
    assert (result.exit_code, result.output) == (0, "")


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        pytest.param({"event": "cycle"}, "end: 0 tool calls, 0 tokens", id="cycle"),
        pytest.param({"event": "cycle_start"}, "start: 0 tasks, no new mail", id="start"),
        pytest.param({"event": "cycle_start", "cycle": 2, "tasks": ["t1"]},
                     "#2 start: 1 task, no new mail", id="start-without-mail"),
        pytest.param({"event": "note"}, "note", id="other"),
        pytest.param({"event": "cycle", "duration_ms": 4, "tool_calls": [{"input": {}}]},
                     "✓ ?\nend: 1 tool call, 0 tokens, 4 ms", id="a-call"),
    ],
)
def test_a_field_missing_from_a_record_is_left_out_not_shown_as_none(
    app: typer.Typer, hive: Hive, record: dict[str, Any], expected: str
) -> None:
    write_agent(hive, "worker")
    hive.audit_path("worker").parent.mkdir(parents=True, exist_ok=True)
    hive.audit_path("worker").write_text(json.dumps(record) + "\n")
    result = log(app, hive, "worker")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("?        worker "), result.output  # no time: "?"
    assert "\n".join(what(line) for line in result.output.splitlines()) == expected


def test_a_result_with_escape_sequences_is_shown_without_them() -> None:
    # A hive file read by a tool, or a server's result: `log` and `top` print it.
    from hivemind.cli.logview import one_line
    shown = one_line("a\x1b]0;owned\x07 b\x1b[2J\u202ec")
    assert shown == "a\ufffd]0;owned\ufffd b\ufffd[2J\ufffdc"
