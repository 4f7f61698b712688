"""A real model service errs: the daemon meets each kind of error as it should, through
the real SDK against a fake Messages API on 127.0.0.1 (401, 404, 400, 429, 529 bursts,
hangs). Nothing is lost, nothing is marked done that was not, and the user is told."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.outcome import BoardBefore, exit_code, troubles
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.settings import HiveConfig
from tests.fake_anthropic import FakeAnthropic, Reply, error_body, message_body
from tests.helpers import fast_config, run_until_idle, until, write_agent, write_task
from tests.scripted_model import task_completer, tool_use

KEY = "sk-ant-model-errors-test-key"
BAD_MODEL = "claude-no-such-model"

ERRORS = {
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "this key may not use that model"),
    404: ("not_found_error", f"model: {BAD_MODEL}"),
    400: ("invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"),
}


def provider(api: FakeAnthropic, timeout: float = 5.0) -> AnthropicProvider:
    return AnthropicProvider(api_key=KEY, base_url=api.base_url, timeout=timeout)


def refusing(status: int) -> Reply:
    kind, message = ERRORS[status]
    return Reply(status=status, body=error_body(kind, message))


def unread(hive: Hive, box: str) -> list[Path]:
    return sorted(p for p in (hive.mailboxes_dir / box / "new").glob("*") if p.is_file())


def read(hive: Hive, box: str) -> list[Path]:
    return sorted(p for p in (hive.mailboxes_dir / box / "cur").glob("*") if p.is_file())


def status(hive: Hive) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(hive.status_file.read_text())
    return data


def config(hive: Hive, **daemon: float) -> HiveConfig:
    cfg = fast_config(hive)
    for key, value in daemon.items():
        setattr(cfg.daemon, key, value)
    return cfg


# -- 3. mail leaves new/ only after a model turn that ended without a provider error --------


@pytest.mark.parametrize("status_code", [401, 404, 400],
                         ids=["bad-key", "bad-model", "bad-request"])
def test_mail_stays_unread_when_the_model_api_refuses(hive: Hive, status_code: int) -> None:
    """A 401 or a 404 moved the agent's unread mail to cur/, never answered."""
    write_agent(hive, "worker")
    PostOffice(hive).send(HUMAN, "worker", "question", "What is the plan?")
    with FakeAnthropic() as api:
        api.responder = lambda _body: refusing(status_code)
        run_until_idle(hive, provider(api), backoff=0.01)
        sent = len(api.message_requests)

    assert sent == 1  # no try will change a refusal
    assert len(unread(hive, "worker")) == 1 and read(hive, "worker") == []


def test_mail_stays_unread_when_a_later_round_of_the_turn_fails(hive: Hive) -> None:
    """The model answered the first round with a tool call, then the service went away:
    the turn never ended, yet the mail was marked read."""
    write_agent(hive, "worker")
    PostOffice(hive).send(HUMAN, "worker", "question", "What is the plan?")
    replies = iter([
        Reply(body=message_body([tool_use(1, "search_files", pattern="plan")],
                                stop_reason="tool_use")),
        Reply(status=529, body=error_body("overloaded_error", "Overloaded")),
    ])
    with FakeAnthropic() as api:
        api.responder = lambda _body: next(replies)
        daemon = run_until_idle(hive, provider(api), max_cycles=1)

    assert daemon.exit_reason == "max-cycles"
    assert len(unread(hive, "worker")) == 1 and read(hive, "worker") == []


# -- 4. transient errors: wait visibly, up to give_up_after -----------------------------


def test_an_outage_is_waited_out_and_the_wait_shows_in_status(hive: Hive) -> None:
    """Three 529s in a few seconds gave up ("nothing more can happen without you")."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    PostOffice(hive).send(HUMAN, "worker", "question", "Any news?")
    seen_states: set[str] = set()

    async def main(api: FakeAnthropic) -> Daemon:
        daemon = Daemon(hive, config(hive), provider(api),
                        RunOptions(until_idle=True, idle_settle=0.2, backoff=0.4))
        running = asyncio.create_task(daemon.run())

        def waiting() -> bool:
            if hive.status_file.exists():
                seen_states.add(status(hive)["agents"].get("worker", {}).get("state", ""))
            return any(s.startswith("waiting for the model service, next try in ")
                       for s in seen_states)

        await until(waiting, "status says the agent waits for the model service")
        await asyncio.wait_for(running, 30)
        return daemon

    with FakeAnthropic() as api:
        api.outage(3.5, 529, retry_after=1)
        api.responder = task_completer
        daemon = asyncio.run(main(api))
        errors = [r for r in api.message_requests]

    assert len(errors) >= 3
    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()
    assert unread(hive, "worker") == [] and len(read(hive, "worker")) == 1


def test_a_hung_request_is_given_up_and_tried_again(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.hang()
        api.reply_error(429, "rate_limit_error", "slow down", retry_after=0.2)
        api.responder = task_completer
        daemon = run_until_idle(hive, provider(api, timeout=0.5), backoff=0.05)

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()


def test_after_give_up_after_the_run_stops_and_nothing_is_marked(hive: Hive) -> None:
    hive.config_file.write_text("[daemon]\ngive_up_after = 1.5\n")
    write_agent(hive, "worker")
    write_task(hive, "t1")
    PostOffice(hive).send(HUMAN, "worker", "question", "Any news?")
    with FakeAnthropic() as api:
        api.outage(600, 503, "api_error", "Service Unavailable")
        daemon = run_until_idle(hive, provider(api), backoff=0.05)

    assert daemon.exit_reason == "model-unavailable"
    assert status(hive)["agents"]["worker"]["state"] == "stopped waiting for the model service"
    assert (hive.active_dir_for("worker") / "t1.md").is_file()  # not failed, not done
    assert len(unread(hive, "worker")) == 1
    assert "HTTP 503" in (daemon.runners["worker"].agent.last_error or "")


# -- 4. permanent for the agent: it pauses, its tasks go back, human is told ------------


def by_model(body: Any) -> Reply:
    """A service that knows every model but BAD_MODEL (404 for that one)."""
    if isinstance(body, dict) and body.get("model") == BAD_MODEL:
        return refusing(404)
    return task_completer(body)


def test_a_refused_model_pauses_the_agent_and_another_takes_its_task(hive: Hive) -> None:
    write_agent(hive, "ann", front=f"model: {BAD_MODEL}\nskills: [billing]\n")
    write_agent(hive, "bob")
    write_task(hive, "t1", front="domain: billing\n")
    before = BoardBefore.of(hive)
    with FakeAnthropic() as api:
        api.responder = by_model
        daemon = run_until_idle(hive, provider(api), backoff=0.01)
        to_ann = [r for r in api.message_requests if r.body["model"] == BAD_MODEL]

    assert len(to_ann) == 1
    # Idle, as every task ended done, yet not all is well: the run exits 4, naming ann.
    found = troubles(hive, before, daemon.runners.values())
    assert [(t.kind, t.name) for t in found] == [("paused", "ann")]
    assert exit_code(daemon.exit_reason, found) == 4
    assert "agent: bob" in (hive.done_dir / "t1.md").read_text()
    ann = status(hive)["agents"]["ann"]
    assert ann["state"].startswith("paused")
    assert "HTTP 404" in ann["paused_because"]
    told = [p for p in unread(hive, HUMAN) if "[paused] ann" in p.read_text()]
    assert len(told) == 1
    assert daemon.runners["ann"].model_pause is not None


@pytest.mark.parametrize("status_code", [401, 403])
def test_a_refused_key_pauses_the_agent_once(hive: Hive, status_code: int) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    PostOffice(hive).send(HUMAN, "worker", "question", "Any news?")
    with FakeAnthropic() as api:
        api.responder = lambda _body: refusing(status_code)
        daemon = run_until_idle(hive, provider(api), backoff=0.01)
        sent = len(api.message_requests)

    assert sent == 1
    assert daemon.exit_reason == "stalled"  # t1 is back in tasks/ with nobody to take it
    assert (hive.tasks_dir / "t1.md").is_file()
    assert "assigned" not in (hive.tasks_dir / "t1.md").read_text()
    assert daemon.waiting == [("t1", "no agent is taking work: worker is paused: "
                               + (daemon.runners["worker"].model_pause or "?"))]
    assert len([p for p in unread(hive, HUMAN) if "[paused] worker" in p.read_text()]) == 1
    assert len(unread(hive, "worker")) == 1


def test_an_edit_of_its_rom_lifts_the_pause(hive: Hive) -> None:
    rom = write_agent(hive, "ann", front=f"model: {BAD_MODEL}\n")
    write_task(hive, "t1", front="assignee: ann\n")

    async def main(api: FakeAnthropic) -> Daemon:
        daemon = Daemon(hive, config(hive), provider(api), RunOptions(backoff=0.01))
        running = asyncio.create_task(daemon.run())
        await until(lambda: "ann" in daemon.runners
                    and daemon.runners["ann"].model_pause is not None, "ann is paused")
        await until((hive.tasks_dir / "t1.md").is_file, "t1 is given back")
        why = "ann is paused: " + (daemon.runners["ann"].model_pause or "?")
        await until(lambda: any(t == "t1" and why in w for t, w in daemon.waiting),
                    "t1 waits for ann, saying why")
        rom.write_text(rom.read_text().replace(BAD_MODEL, "claude-sonnet-5-5"))
        await until((hive.done_dir / "t1.md").is_file, "ann did t1 after the edit")
        daemon.stop("test")
        await running
        return daemon

    with FakeAnthropic() as api:
        api.responder = by_model
        daemon = asyncio.run(main(api))

    assert daemon.runners["ann"].model_pause is None
    assert "agent: ann" in (hive.done_dir / "t1.md").read_text()


# -- 4. a 400 is the request's fault: its task fails with the error -------------------------


def test_a_refused_request_fails_its_task_with_the_error(hive: Hive) -> None:
    """The task stayed in active/ for ever, and the run called that 'stalled'."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = lambda _body: refusing(400)
        daemon = run_until_idle(hive, provider(api), backoff=0.01)
        sent = len(api.message_requests)

    assert sent == 1
    assert daemon.exit_reason == "idle"
    failed = (hive.failed_dir / "t1.md").read_text()
    assert "HTTP 400" in failed and "prompt is too long" in failed
    assert daemon.runners["worker"].model_pause is None  # the agent goes on


def test_an_agent_in_a_worker_process_is_paused_by_the_lead(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cycle runs in the worker; its kind of failure crosses the pipe to the lead,
    which pauses the agent and gives its task to the other."""
    write_agent(hive, "ann")
    write_agent(hive, "bob", front=f"model: {BAD_MODEL}\nskills: [billing]\n")  # the worker's
    write_task(hive, "t1", front="domain: billing\n")
    with FakeAnthropic() as api:
        api.responder = by_model
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # for the worker's own provider
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        daemon = run_until_idle(hive, provider(api), backoff=0.01, workers=2)
        to_bob = [r for r in api.message_requests if r.body["model"] == BAD_MODEL]

    assert daemon.runners["bob"].worker is not None
    assert len(to_bob) == 1
    assert daemon.runners["bob"].model_pause is not None
    assert "agent: ann" in (hive.done_dir / "t1.md").read_text()
    assert status(hive)["agents"]["bob"]["state"].startswith("paused")
