"""The think-cycle through the real anthropic SDK against a fake Messages API on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from hivemind.llm.anthropic import AnthropicProvider
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply, error_body, message_body
from tests.helpers import cut_short_exit, fast_config, run_until_idle, write_agent, write_task
from tests.scripted_model import context_entries, task_completer

KEY = "sk-ant-test-key-never-printed"


def provider(api: FakeAnthropic, retries: int = 2) -> AnthropicProvider:
    return scripted_model.provider(api, KEY, retries)


def audit(hive: Hive, agent: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in hive.audit_path(agent).read_text().splitlines() if x]


def test_request_has_tools_rom_context_and_cache_marks(hive: Hive) -> None:
    write_agent(hive, "worker", body="MARKER-ROM: you are the careful worker.\n")
    (hive.knowledge_dir / "facts.md").write_text("# Facts\n\nBees make honey.\n")
    write_task(hive, "t1", "Say something about bees.")
    with FakeAnthropic() as api:
        api.responder = task_completer
        run_until_idle(hive, provider(api))
        body = api.message_requests[0].body

    tools = body["tools"]
    assert {t["name"] for t in tools} >= {"send_message", "write_file", "complete_task"}
    assert tools[-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in tools[:-1])
    assert "MARKER-ROM" in body["system"][0]["text"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    stable, volatile = body["messages"][0]["content"]
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in volatile
    entries = context_entries(body)
    types = [e["metadata"]["type"] for e in entries]
    assert types.index("knowledge") < types.index("task") < types.index("status")
    assert "MARKER-ROM" not in json.dumps(entries)  # the ROM is in system only
    task = next(e for e in entries if e["id"] == "task:t1")
    assert "Say something about bees." in task["content"]
    assert set(task) == {"id", "content", "metadata"}  # confidence 1, priority high: defaults


def test_tool_use_is_executed_and_its_result_sent_back(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        # A first round that ends no task: its result goes back to the model.
        api.responder = scripted_model.scripted(
            [scripted_model.tool_use(1, "write_file", path="workspace/t1.md", content="bees")],
            [scripted_model.tool_use(2, "complete_task", task_id="t1",
                                     result="done by the model")],
        )
        run_until_idle(hive, provider(api))
        second = api.message_requests[1].body

    assert "done by the model" in (hive.done_dir / "t1.md").read_text()
    assistant, results = second["messages"][-2], second["messages"][-1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][-1]["type"] == "tool_use"
    assert results["content"][0]["type"] == "tool_result"
    assert results["content"][0]["tool_use_id"] == assistant["content"][-1]["id"]


def test_a_lone_surrogate_in_a_tool_call_is_replaced_not_fatal(hive: Hive) -> None:
    """A reply's JSON may escape half a character (`\\ud800`): such text cannot be
    written anywhere, and it stopped the whole daemon. It becomes U+FFFD before the
    tools see it."""
    write_agent(hive, "worker")
    write_task(hive, "t1")

    with FakeAnthropic() as api:
        api.responder = scripted_model.scripted([
            scripted_model.tool_use(1, "write_file", path="workspace/caf\ud800.md",
                                    content="caf\ud800 ok"),
            scripted_model.tool_use(2, "complete_task", task_id="t1", result="half \udc80"),
        ])
        daemon = run_until_idle(hive, provider(api))

    assert daemon.exit_reason == "idle"
    assert (hive.workspace_dir / "caf\ufffd.md").read_text() == "caf\ufffd ok"
    assert "half \ufffd" in (hive.done_dir / "t1.md").read_text()
    [cycle] = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert [c["error"] for c in cycle["tool_calls"]] == [False, False]


@pytest.mark.parametrize("bad_input", ["workspace/a.md", [1, 2], None, 42])
def test_a_tool_call_whose_input_is_no_object_fails_alone(hive: Hive, bad_input: Any) -> None:
    """The whole reply was refused ("not a Messages reply"): its tokens went uncounted
    (budgets too), the valid calls beside it never ran, and the task stayed stuck."""
    write_agent(hive, "worker")
    write_task(hive, "t1")

    with FakeAnthropic() as api:
        api.responder = scripted_model.scripted([
            {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": bad_input},
            scripted_model.tool_use(2, "complete_task", task_id="t1", result="finished"),
        ])
        daemon = run_until_idle(hive, provider(api))
        told = scripted_model.last_results(api.message_requests[1].body)

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()
    assert daemon.totals.usage.output_tokens > 0  # the replies were counted
    assert told[0].startswith("invalid input for write_file: the input must be a JSON object")
    [cycle] = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert [c["error"] for c in cycle["tool_calls"]] == [True, False]


def test_a_refusal_is_an_error_the_user_sees_not_a_silent_success(hive: Hive) -> None:
    """An empty reply with stop_reason refusal counted as a good cycle: the task stayed
    active with no trace of why. Now each refusal is in the log, and the task fails once
    its idle turns are spent."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = lambda _body: Reply(body=message_body([], stop_reason="refusal"))
        daemon = run_until_idle(hive, provider(api))

    assert daemon.exit_reason == "idle"
    assert daemon.runners["worker"].agent.last_error == (
        "the model refused to answer (stop_reason refusal)")
    cycles = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert [(c["stop_reason"], c["error"]) for c in cycles] == [
        ("refusal", "the model refused to answer (stop_reason refusal)")] * 2
    assert "max_idle_turns=2" in (hive.failed_dir / "t1.md").read_text()


def test_a_reply_of_nothing_is_an_error_the_user_sees(hive: Hive) -> None:
    """An end_turn reply with no text and no tool call counted as a good cycle: the
    task stayed active with no trace of why."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = lambda _body: Reply(body=message_body([]))
        daemon = run_until_idle(hive, provider(api))

    said = "the model answered with nothing: no text and no tool call (stop_reason end_turn)"
    assert daemon.exit_reason == "idle"
    assert daemon.runners["worker"].agent.last_error == said
    cycles = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert [(c["stop_reason"], c["error"]) for c in cycles] == [("end_turn", said)] * 2
    assert "max_idle_turns=2" in (hive.failed_dir / "t1.md").read_text()


def test_an_empty_reply_after_the_tool_calls_ends_the_cycle_well(hive: Hive) -> None:
    """Claude often ends its turn with nothing more to say once its calls are done."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    replies = iter([
        Reply(body=message_body(
            [scripted_model.tool_use(1, "complete_task", task_id="t1", result="ok")],
            stop_reason="tool_use")),
        Reply(body=message_body([])),
    ])
    with FakeAnthropic() as api:
        api.responder = lambda _body: next(replies)
        daemon = run_until_idle(hive, provider(api))

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()
    [cycle] = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert cycle["error"] is None


def test_the_next_cycle_waits_as_long_as_the_api_asked(hive: Hive) -> None:
    """The SDK honours retry-after, but the daemon's own back-off called again after
    2 s and 4 s when asked for 8."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.reply(Reply(status=429, body=error_body("rate_limit_error", "slow down"),
                        headers={"retry-after": "1.5"}))
        api.responder = task_completer
        started = time.monotonic()
        daemon = run_until_idle(hive, provider(api, retries=0), backoff=0.01)
        waited = time.monotonic() - started

    assert (hive.done_dir / "t1.md").is_file()
    assert waited >= 1.5
    [first, *_] = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert "(it asks to wait 1.5 s)" in first["error"]
    assert daemon.exit_reason == "idle"


def test_a_refused_request_is_not_sent_again_until_something_new_comes(hive: Hive) -> None:
    """401, 403, 404, 400, 413: the same request is refused again. It was retried with
    back-off for ever (for every agent), every few seconds at first."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.reply_error(404, "not_found_error", "model: no-such-model", times=100)
        daemon = run_until_idle(hive, provider(api), backoff=0.01)
        sent = len(api.message_requests)

    assert sent == 1
    assert daemon.exit_reason == "stalled"
    assert "HTTP 404" in (daemon.runners["worker"].agent.last_error or "")


def test_429_and_529_are_retried(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.reply_error(429, "rate_limit_error", "slow down")
        api.reply_error(529, "overloaded_error", "Overloaded")
        api.responder = task_completer
        run_until_idle(hive, provider(api, retries=2))
        statuses = len(api.message_requests)

    assert (hive.done_dir / "t1.md").exists()
    assert statuses == 3  # 429, 529, then the tool call (it ends the last task: no more)
    assert all(r.get("error") is None for r in audit(hive, "worker") if r["event"] == "cycle")


def test_persistent_failure_leaves_task_active_and_visible(hive: Hive) -> None:
    hive.config_file.write_text("[daemon]\ngive_up_after = 1.0\n")
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.reply_error(529, "overloaded_error", "Overloaded", times=1000)
        daemon = run_until_idle(hive, provider(api, retries=0), backoff=0.01)

    assert daemon.exit_reason == "model-unavailable"
    assert (hive.active_dir_for("worker") / "t1.md").exists()
    errors = [r["error"] for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert len(errors) >= 3 and all("529" in e or "verloaded" in e for e in errors)
    status = json.loads(hive.status_file.read_text())
    assert "verloaded" in status["agents"]["worker"]["last_error"]
    assert KEY not in hive.status_file.read_text()
    assert KEY not in hive.audit_path("worker").read_text()


def test_next_cycle_retries_after_a_failure(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.reply_error(500, "api_error", "boom", times=1)
        api.responder = task_completer
        run_until_idle(hive, provider(api, retries=0), backoff=0.01)

    assert (hive.done_dir / "t1.md").exists()
    cycles = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert cycles[0]["error"] is not None and cycles[-1]["error"] is None


def _daemon(hive: Hive, api: FakeAnthropic) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url,
           "HIVEMIND_HIVE": str(hive.root)}
    return subprocess.Popen(
        [sys.executable, "-m", "hivemind", "run", "--until-idle", "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def slow_completer(body: Any) -> Reply:
    """Completes one task a round, taking 0.3 s a reply: a signal finds a cycle in flight
    (all at once, a cycle's one call could end every task it held before the signal)."""
    tasks = scripted_model.active_tasks(body)
    n = sum(m["role"] == "assistant" for m in body["messages"])
    if n < len(tasks):
        call = scripted_model.tool_use(n, "complete_task", task_id=tasks[n],
                                       result="done by the model")
        reply = Reply(body=message_body([call], stop_reason="tool_use"))
    else:
        reply = scripted_model.text_reply("all done")
    reply.delay = 0.3
    return reply


def six_tasks_for_a_worker(hive: Hive) -> None:
    write_agent(hive, "worker")
    for i in range(6):
        write_task(hive, f"t{i}")


def test_sigterm_mid_run_then_restart_loses_and_repeats_nothing(hive: Hive) -> None:
    six_tasks_for_a_worker(hive)

    with FakeAnthropic() as api:
        api.responder = slow_completer
        first = _daemon(hive, api)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not list(hive.done_dir.glob("*.md")):
            time.sleep(0.05)
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=30)
        assert first.returncode == cut_short_exit(hive), out.decode()
        done_before = len(list(hive.done_dir.glob("*.md")))
        assert done_before < 6, "stopped too late to test a restart"
        second = _daemon(hive, api)
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 0, out.decode()

    done = sorted(p.name for p in hive.done_dir.glob("*.md"))
    assert done == [f"t{i}.md" for i in range(6)]
    assert not list(hive.tasks_dir.glob("*.md"))
    assert not list(hive.active_dir.rglob("*.md"))
    for path in hive.done_dir.glob("*.md"):
        assert path.read_text().count("## Result") == 1


def test_api_key_echoed_by_the_model_is_redacted_in_audit_and_status(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")

    def leaky(body: Any) -> Reply:
        reply = task_completer(body)
        for block in reply.body["content"]:
            if block["type"] == "tool_use":
                block["input"]["result"] = f"the key is {KEY}"
        return reply

    with FakeAnthropic() as api:
        api.responder = leaky
        daemon = Daemon(hive, fast_config(hive), provider(api),
                        RunOptions(until_idle=True, idle_settle=0.2), secrets=(KEY,))
        asyncio.run(daemon.run())

    assert (hive.done_dir / "t1.md").exists()
    audit_text = hive.audit_path("worker").read_text()
    assert "the key is [redacted]" in audit_text
    for path in [hive.status_file, hive.audit_path("worker")]:
        assert KEY not in Path(path).read_text()


def test_max_steps_stops_the_cycle_and_its_ceiling_the_task(hive: Hive) -> None:
    write_agent(hive, "worker", front="max_steps: 3\nmax_rounds_per_task: 7\n")
    write_task(hive, "t1")
    counter = iter(range(1000))

    def restless(body: Any) -> Reply:
        n = next(counter)
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "search_files",
                "input": {"pattern": f"never-{n}"}}
        return Reply(body=message_body([call], stop_reason="tool_use"))

    with FakeAnthropic() as api:
        api.responder = restless
        daemon = run_until_idle(hive, provider(api))
        calls = len(api.message_requests)

    assert calls == 7  # cycles of max_steps rounds while each round is new, to the ceiling
    assert daemon.exit_reason == "idle"
    assert "max_rounds_per_task=7" in (hive.failed_dir / "t1.md").read_text()
    cycles = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert [len(c["tool_calls"]) for c in cycles] == [3, 3, 1]


def test_usage_and_cost_are_recorded_per_cycle_from_the_price_table(hive: Hive) -> None:
    hive.config_file.write_text(
        '[pricing."claude-sonnet-5-5"]\ninput = 100.0\noutput = 1000.0\n'
        "cache_write = 10.0\ncache_read = 1.0\n"  # not the default prices
    )
    write_agent(hive, "worker")
    write_task(hive, "t1")
    figures = {"input_tokens": 1000, "output_tokens": 200,
               "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 5000}

    rounds = scripted_model.scripted(  # two calls: a first round ends no task
        [scripted_model.tool_use(1, "write_file", path="workspace/t1.md", content="bees")],
        [scripted_model.tool_use(2, "complete_task", task_id="t1", result="done")],
    )

    def completer(body: Any) -> Reply:
        reply = rounds(body)
        reply.body["usage"] = figures
        return reply

    with FakeAnthropic() as api:
        api.responder = completer
        daemon = run_until_idle(hive, provider(api))

    [cycle] = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert cycle["usage"] == {"input_tokens": 2000, "output_tokens": 400,
                              "cache_write_tokens": 6000, "cache_read_tokens": 10000}
    per_call = (1000 * 100.0 + 200 * 1000.0 + 3000 * 10.0 + 5000 * 1.0) / 1_000_000
    assert cycle["cost"] == pytest.approx(2 * per_call)  # two calls: the two rounds
    assert daemon.totals.cost == pytest.approx(2 * per_call)


def test_a_model_with_no_price_is_named_not_counted_as_free(hive: Hive) -> None:
    # A local model server behind base_url: its model is in no price table.
    write_agent(hive, "worker", front="model: local-llama\n")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = task_completer
        daemon = run_until_idle(hive, provider(api))

    [cycle] = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert cycle["usage"]["input_tokens"] > 0 and cycle["cost"] is None
    assert daemon.totals.cost == 0.0
    assert daemon.totals.as_dict()["unpriced_models"] == ["local-llama"]
    status = json.loads(hive.status_file.read_text())
    assert status["totals"]["unpriced_models"] == ["local-llama"]
    shown = CliRunner().invoke(app, ["status", str(hive.root)])
    assert "(no price in [pricing] for local-llama)" in " ".join(shown.output.split())


def test_sigint_finishes_the_cycle_in_flight_and_exits_cleanly(hive: Hive) -> None:
    six_tasks_for_a_worker(hive)

    with FakeAnthropic() as api:
        api.responder = slow_completer
        run = _daemon(hive, api)
        deadline = time.monotonic() + 20
        log = hive.audit_path("worker")
        while time.monotonic() < deadline and "cycle_start" not in (
            log.read_text() if log.exists() else ""
        ):
            time.sleep(0.02)
        run.send_signal(signal.SIGINT)  # a cycle is in flight: its model call takes 0.3 s
        out, _ = run.communicate(timeout=30)

    text = out.decode()
    assert run.returncode == cut_short_exit(hive), text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    records = audit(hive, "worker")
    starts = [r["cycle"] for r in records if r["event"] == "cycle_start"]
    ends = [r["cycle"] for r in records if r["event"] == "cycle"]
    assert starts and starts == ends  # the cycle in flight was finished, not cut
    tasks = [p.name for p in [*hive.tasks_dir.glob("*.md"), *hive.active_dir.rglob("*.md"),
                              *hive.done_dir.glob("*.md")]]
    assert sorted(tasks) == [f"t{i}.md" for i in range(6)]  # each once, none lost
