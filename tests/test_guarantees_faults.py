"""Model faults through the real SDK and the fake Messages API: nothing is lost, nothing crashes.

Each fault is retried (by the SDK), fed back to the model as a tool error, or
fails the cycle softly: the task stays in tasks/active/, the daemon ends
normally, and the error is in status.json (`last_error`) and the audit log.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from hivemind.llm.anthropic import AnthropicProvider
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import fast_config, run_until_idle, write_agent, write_task
from tests.scripted_model import task_completer

KEY = "sk-ant-fault-key-never-printed"


def provider(api: FakeAnthropic, *, retries: int = 0, timeout: float = 5.0) -> AnthropicProvider:
    return AnthropicProvider(api_key=KEY, base_url=api.base_url, timeout=timeout,
                             max_retries=retries)


def audit(hive: Hive) -> list[dict[str, Any]]:
    path = hive.audit_path("worker")
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def cycles(hive: Hive) -> list[dict[str, Any]]:
    return [r for r in audit(hive) if r["event"] == "cycle"]


def status_error(hive: Hive) -> str | None:
    error: str | None = json.loads(hive.status_file.read_text())["agents"]["worker"]["last_error"]
    return error


def one_task_hive(hive: Hive) -> Hive:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Do the one thing.")
    return hive


def assert_nothing_leaked(hive: Hive) -> None:
    for path in [hive.status_file, hive.audit_path("worker")]:
        assert KEY not in Path(path).read_text()


def assert_soft_failure(hive: Hive, daemon: Daemon, reason: str, *needles: str) -> None:
    """The task is still held, the daemon stopped on its own, the error is visible."""
    assert daemon.exit_reason == reason
    assert (hive.active_dir_for("worker") / "t1.md").is_file()
    assert not list(hive.done_dir.glob("*.md"))
    errors = [c["error"] for c in cycles(hive)]
    assert errors and all(errors), errors
    shown = status_error(hive)
    assert shown is not None
    for needle in needles:
        assert needle in shown, shown
        assert needle in errors[-1]
    assert_nothing_leaked(hive)


# -- transient faults: retried by the SDK, the task gets done ------------------------


@pytest.mark.parametrize(
    "script",
    [
        pytest.param(lambda api: api.reply_error(429, "rate_limit_error", "slow down"), id="429"),
        pytest.param(lambda api: api.reply_error(529, "overloaded_error", "Overloaded"), id="529"),
        pytest.param(lambda api: api.reply_error(500, "api_error", "boom"), id="500"),
        pytest.param(lambda api: api.reset_connection(), id="connection-reset"),
    ],
)
def test_a_transient_fault_is_retried_and_the_task_done(hive: Hive, script: Any) -> None:
    one_task_hive(hive)
    with FakeAnthropic() as api:
        script(api)
        api.responder = task_completer
        daemon = run_until_idle(hive, provider(api, retries=2))

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()
    assert all(c["error"] is None for c in cycles(hive))


def test_a_slow_reply_past_the_timeout_is_retried(hive: Hive) -> None:
    one_task_hive(hive)
    with FakeAnthropic() as api:
        api.reply(Reply(body=message_body([{"type": "text", "text": "late"}]), delay=3.0))
        api.responder = task_completer
        daemon = run_until_idle(hive, provider(api, retries=1, timeout=0.5))

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()


# -- persistent faults: the cycle fails softly, the error is visible ---------------------
#
# Each of these ends with the daemon giving up: "model-unavailable" once the model
# service stayed away past give_up_after (1 s here), "stalled" for a model that keeps
# answering badly; the scenarios run side by side, one hive and one fake API each.


def slow(body: Any) -> Reply:
    return Reply(body=message_body([{"type": "text", "text": "late"}]), delay=3.0)


def cut(body: Any) -> Reply:
    return Reply(body=message_body([{"type": "text", "text": "cut"}], stop_reason="max_tokens"))


def not_a_message(body: Any) -> Reply:
    return Reply(body=b"<html>502 bad gateway</html>")


PERSISTENT: dict[str, tuple[Any, str, float]] = {
    "429": (lambda api: api.reply_error(429, "rate_limit_error", "slow down", times=50),
            "429", 5.0),
    "529": (lambda api: api.reply_error(529, "overloaded_error", "Overloaded", times=50),
            "529", 5.0),
    "500": (lambda api: api.reply_error(500, "api_error", "boom", times=50), "500", 5.0),
    "reset": (lambda api: api.reset_connection(times=50), "connection", 5.0),
    "400-too-long": (
        lambda api: api.reply_error(
            400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum",
            times=50),
        "prompt is too long", 5.0),
    "slow-past-timeout": (lambda api: setattr(api, "responder", slow), "within 0.3 s", 0.3),
    "max-tokens-always": (lambda api: setattr(api, "responder", cut), "max_tokens", 5.0),
    "not-a-messages-reply": (lambda api: setattr(api, "responder", not_a_message), "", 5.0),
}


@dataclass
class Outcome:
    hive: Hive
    daemon: Daemon
    requests: int


@pytest.fixture(scope="module")
def persistent(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Every persistent fault, each on its own hive and fake API, run at the same time."""
    apis = {name: FakeAnthropic() for name in PERSISTENT}
    daemons: dict[str, tuple[Hive, Daemon]] = {}
    try:
        for name, (script, _, timeout) in PERSISTENT.items():
            hive = one_task_hive(Hive(tmp_path_factory.mktemp(name) / "hive").ensure())
            script(apis[name])
            retries = 3 if name == "400-too-long" else 0  # a 400 must not be retried anyway
            config = fast_config(hive)
            config.daemon.give_up_after = 1.0
            daemon = Daemon(hive, config,
                            provider(apis[name], retries=retries, timeout=timeout),
                            RunOptions(until_idle=True, idle_settle=0.2, backoff=0.01))
            daemons[name] = (hive, daemon)

        async def main() -> None:
            await asyncio.wait_for(asyncio.gather(*(d.run() for _, d in daemons.values())), 60)

        asyncio.run(main())
        return {name: Outcome(hive, daemon, len(apis[name].message_requests))
                for name, (hive, daemon) in daemons.items()}
    finally:
        for api in apis.values():
            api.close()


@pytest.mark.parametrize("name", [n for n in PERSISTENT if n != "400-too-long"])
def test_a_persistent_fault_fails_the_cycle_softly(
    persistent: dict[str, Outcome], name: str
) -> None:
    outcome = persistent[name]
    needle = PERSISTENT[name][1]
    reason = "stalled" if name == "max-tokens-always" else "model-unavailable"
    assert_soft_failure(outcome.hive, outcome.daemon, reason, *([needle] if needle else []))


def test_a_refused_request_fails_its_task_with_the_error(
    persistent: dict[str, Outcome]
) -> None:
    """A 400 is the request's fault: the same request would be refused again."""
    outcome = persistent["400-too-long"]
    assert outcome.daemon.exit_reason == "idle"
    assert "prompt is too long" in (outcome.hive.failed_dir / "t1.md").read_text()
    assert_nothing_leaked(outcome.hive)


def test_a_400_is_not_retried_by_the_sdk(persistent: dict[str, Outcome]) -> None:
    outcome = persistent["400-too-long"]  # its provider allows 3 retries
    assert outcome.requests == len(cycles(outcome.hive))  # one request per cycle


# -- bad tool calls: fed back to the model as tool errors ------------------------------


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]["content"]
    return [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]


def completer_after_errors(body: Any) -> Reply:
    """A model that, told its call failed, completes its tasks properly."""
    results = tool_results(body)
    if results and any(r.get("is_error") for r in results):
        first_turn_only = {**body, "messages": body["messages"][:1]}
        return task_completer(first_turn_only)
    return task_completer(body)


@pytest.mark.parametrize(
    ("name", "tool_input", "needle"),
    [
        pytest.param("complete_task", {"task_id": 7, "result": "x"}, "task_id", id="wrong-type"),
        pytest.param("complete_task", {"task_id": "t1"}, "result", id="missing-field"),
        pytest.param("complete_task", {"task_id": "t1", "result": {"a": 1}}, "result",
                     id="object-for-text"),
        pytest.param("write_file", {"path": ["workspace/x.md"], "content": "x"}, "path",
                     id="list-for-path"),
        pytest.param("rm_rf", {"path": "/"}, "unknown tool", id="unknown-tool"),
        pytest.param("complete_task", {"task_id": "not-mine", "result": "x"}, "do not hold",
                     id="task-not-held"),
        pytest.param("write_file", {"path": "workspace/t1.md/deeper.md", "content": "x"},
                     "workspace/t1.md", id="folder-is-a-file"),
    ],
)
def test_a_bad_tool_call_is_fed_back_as_a_tool_error(
    hive: Hive, name: str, tool_input: dict[str, Any], needle: str
) -> None:
    one_task_hive(hive)
    (hive.workspace_dir / "t1.md").write_text("a file, not a folder\n")
    with FakeAnthropic() as api:
        api.reply_tool_use(name, tool_input)
        api.responder = completer_after_errors
        daemon = run_until_idle(hive, provider(api))
        second = api.message_requests[1].body

    [result] = tool_results(second)
    assert result.get("is_error") is True
    assert needle in result["content"]
    first = cycles(hive)[0]
    assert first["tool_calls"][0]["error"] is True
    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()


def test_max_tokens_in_the_middle_of_a_tool_call_does_not_run_it(hive: Hive) -> None:
    one_task_hive(hive)
    cut = {"type": "tool_use", "id": "toolu_cut", "name": "write_file",
           "input": {"path": "workspace/report.md", "content": "The first half of"}}
    with FakeAnthropic() as api:
        api.reply(Reply(body=message_body([cut], stop_reason="max_tokens")))
        api.responder = completer_after_errors
        daemon = run_until_idle(hive, provider(api))
        second = api.message_requests[1].body

    assert not (hive.workspace_dir / "report.md").exists()  # a truncated write never lands
    [result] = tool_results(second)
    assert result.get("is_error") is True and "max_tokens" in result["content"]
    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()


def test_max_tokens_without_a_tool_call_is_an_error_and_retried(hive: Hive) -> None:
    one_task_hive(hive)
    with FakeAnthropic() as api:
        api.reply_text("I will now call complete_ta", stop_reason="max_tokens")
        api.responder = task_completer
        daemon = run_until_idle(hive, provider(api), backoff=0.01)

    first = cycles(hive)[0]
    assert first["error"] is not None and "max_tokens" in first["error"]
    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()
