"""Stopping and stopped work: a grace period that runs out cuts the cycle in flight without
losing its task, and the loop breaker counts a task's repeats across its cycles.

The daemon runs as `python -m hivemind run` (real signals) or in-process, with the real
anthropic SDK against the fake Messages API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hivemind.hive.layout import Hive
from hivemind.hive.leftovers import writer_pid
from hivemind.llm.anthropic import AnthropicProvider
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import (
    active_tasks,
    context_entries,
    is_first_round,
    task_completer,
    text_reply,
)

REPO = Path(__file__).resolve().parent.parent
KEY = "sk-ant-test-key-of-the-shutdown-tests"
WAIT = 40.0  # s: generous for a start or a stop on a slow machine
MODEL_DELAY = 3 * WAIT  # s the cut call would take: waiting for it cannot pass for a stop


# -- helpers ------------------------------------------------------------------------------


def audit(hive: Hive, agent: str) -> list[dict[str, Any]]:
    path = hive.audit_path(agent)
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def start_daemon(hive: Hive, api: FakeAnthropic) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url,
           "HIVEMIND_HIVE": str(hive.root)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "hivemind", "run", "--until-idle", "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def finish(run: subprocess.Popen[bytes], what: str) -> str:
    """The output of a daemon once it has exited; it must exit within WAIT."""
    try:
        out, _ = run.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        run.kill()
        out, _ = run.communicate()
        raise AssertionError(f"{what}: still running after {WAIT} s\n{out.decode()}") from None
    return out.decode()


def wait_for(condition: Callable[[], bool], what: str, run: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            out, _ = run.communicate()
            raise AssertionError(f"gave up waiting until {what}\n{out.decode()}")
        time.sleep(0.02)


def temp_files(hive: Hive) -> list[str]:
    """Files anywhere in the hive named as the hive names its temp files."""
    return sorted(
        str(Path(dirpath, name).relative_to(hive.root))
        for dirpath, _dirs, files in os.walk(hive.root)
        for name in files
        if writer_pid(name) is not None or name.endswith(".tmp")
    )


# -- the grace period runs out ------------------------------------------------------------


def test_a_stop_cuts_a_cycle_past_its_grace_and_the_restart_finishes_the_task(
    hive: Hive,
) -> None:
    hive.config_file.write_text("[daemon]\ngrace_period = 0.3\nsettle_time = 0.0\n")
    write_agent(hive, "worker")
    write_task(hive, "t1")

    with FakeAnthropic() as api:
        # The first call hangs far longer than the grace period; every later one is quick.
        api.reply(Reply(body=message_body([{"type": "text", "text": "too late"}]),
                        delay=MODEL_DELAY))
        api.responder = task_completer
        first = start_daemon(hive, api)
        wait_for(lambda: any(r["event"] == "cycle_start" for r in audit(hive, "worker"))
                 and len(api.message_requests) == 1, "the model call is in flight", first)
        first.send_signal(signal.SIGTERM)
        out = finish(first, "the daemon stopped with a model call in flight")

        assert first.returncode == 3, out  # cut short with t1 in hand
        assert "Traceback" not in out, out
        assert "stopped: signal" in out, out
        assert "in hand: worker/t1" in " ".join(out.split()), out
        assert len(api.message_requests) == 1  # nothing was retried on the way out
        # The task is where the stop found it: claimed, unfinished, not lost.
        claimed = hive.active_dir_for("worker") / "t1.md"
        assert claimed.is_file()
        assert "## Result" not in claimed.read_text()
        assert not [*hive.tasks_dir.glob("*.md"), *hive.done_dir.glob("*"),
                    *hive.failed_dir.glob("*")]
        assert temp_files(hive) == []

        second = start_daemon(hive, api)
        out = finish(second, "the restarted daemon")
        assert second.returncode == 0, out
        assert "stopped: idle" in out, out

    done = hive.done_dir / "t1.md"
    assert done.read_text().count("## Result") == 1
    assert "done by the model" in done.read_text()
    assert not list(hive.active_dir.rglob("*.md"))
    records = audit(hive, "worker")
    # The cut cycle never ended: the restart says so, and the work went on in cycle 2.
    assert [r["event"] for r in records if r.get("cycle") == 1] == ["cycle_start", "interrupted"]
    [finished] = [r for r in records if r["event"] == "cycle" and r.get("cycle") == 2]
    assert finished["effects"]["tasks_completed"] == ["t1"]
    assert temp_files(hive) == []


# -- the loop breaker across cycles -------------------------------------------------------

NOTE = {"to": "buddy", "subject": "progress", "body": "still on t1", "task": "t1"}
AT_MOST = 6  # notes the model would write if nothing stopped it


def unread_mail_from(body: Any, sender: str) -> bool:
    return any(e["metadata"].get("type") == "message" and not e["metadata"].get("read")
               and e["metadata"].get("from") == sender for e in context_entries(body))


def noter() -> tuple[Callable[[Any], Reply], list[int]]:
    """A model that, each cycle it holds t1, sends buddy the same note about t1 and ends
    its turn; as buddy, it answers each note (which wakes the holder of t1 for another
    cycle). It gives up after AT_MOST notes. The list counts the notes it wrote."""
    written: list[int] = []

    def reply(body: Any) -> Reply:
        if not is_first_round(body):
            return text_reply("nothing more for now")
        if "t1" in active_tasks(body):
            if len(written) >= AT_MOST:
                return text_reply("nothing more for now")
            written.append(1)
            call = {"type": "tool_use", "id": "toolu_1", "name": "send_message", "input": NOTE}
        elif unread_mail_from(body, "worker"):  # buddy
            call = {"type": "tool_use", "id": "toolu_1", "name": "send_message",
                    "input": {"to": "worker", "body": "noted"}}
        else:
            return text_reply("nothing to do")
        return Reply(body=message_body([call], stop_reason="tool_use"))

    return reply, written


def test_the_same_call_for_a_task_in_three_of_its_cycles_stops_it(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_agent(hive, "buddy")
    write_task(hive, "t1", front="assignee: worker\n")
    reply, written = noter()
    with FakeAnthropic() as api:
        api.responder = reply
        provider = AnthropicProvider(api_key=KEY, base_url=api.base_url, timeout=10,
                                     max_retries=0)
        run_until_idle(hive, provider, timeout=60)

    failed = hive.failed_dir / "t1.md"
    assert failed.is_file()
    assert "repeated 3 times" in failed.read_text()
    assert not [*hive.done_dir.glob("*"), *hive.active_dir.rglob("*.md")]
    assert len(written) == 3  # t1 stopped: no fourth note
    notes = [(r["cycle"], r["tasks"], c["error"])
             for r in audit(hive, "worker") if r["event"] == "cycle"
             for c in r["tool_calls"] if c["name"] == "send_message"]
    # One note a cycle, three cycles: the third repeat is the one that stops t1.
    assert notes == [(1, ["t1"], False), (2, ["t1"], False), (3, ["t1"], True)]
    [third] = [c for r in audit(hive, "worker") if r["event"] == "cycle" and r["cycle"] == 3
               for c in r["tool_calls"]]
    assert "[hivemind] task t1 was stopped: the same tool call was repeated 3 times" in (
        third["result"])
