"""Pausing agents by hand while the daemon runs: `hivemind pause`, `resume`, `enabled`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive import steering
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.llm.base import ModelRequest, ModelResponse
from hivemind.llm.offline import OfflineProvider
from tests.fake_anthropic import FakeAnthropic, Reply, error_body
from tests.helpers import fast_config, run_until_idle, until, write_agent, write_task
from tests.scripted_model import provider, task_completer


def status(hive: Hive) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(hive.status_file.read_text())
    return data


@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "two-workers"])
def test_a_paused_agent_takes_no_task_and_no_mail_and_its_tasks_wait(
    hive: Hive, workers: int
) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    write_task(hive, "mine", front="assignee: ann\n")
    write_task(hive, "anyone")
    PostOffice(hive).send(HUMAN, "ann", "hello", "Are you there?")
    steering.pause(hive, "ann")  # before the start: a pause outlives a restart

    daemon = run_until_idle(hive, workers=workers)

    assert daemon.exit_reason == "stalled"  # ann's task and mail wait for a person
    assert "agent: bob" in (hive.done_dir / "anyone.md").read_text()
    assert (hive.tasks_dir / "mine.md").exists()
    assert len(Mailbox(hive, "ann").unread()) == 1
    assert not hive.audit_path("ann").exists()  # not one cycle
    ann = status(hive)["agents"]["ann"]
    assert ann["state"] == "paused (by human; `hivemind resume ann` resumes it)"


class GatedModel:
    """Answers in plain text (no tool call) once `gate` is set: a cycle held in flight."""

    name = "gated"
    offline = True

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        await self.gate.wait()
        return ModelResponse(text="Still working on it.", stop_reason="end_turn",
                             model="gated", provider="gated")

    async def aclose(self) -> None:
        pass


async def test_pausing_mid_cycle_gives_its_tasks_back_once_the_cycle_ends(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_task(hive, "t1")
    model = GatedModel()
    daemon = Daemon(hive, fast_config(hive), model, RunOptions())
    running = asyncio.ensure_future(daemon.run())
    try:
        held = hive.active_dir_for("ann") / "t1.md"
        await until(lambda: model.calls == 1, "ann thinks about t1")
        steering.pause(hive, "ann")
        await until(lambda: daemon.runners["ann"].steer_pause is not None, "the pause is seen")
        assert held.exists()  # the cycle in flight keeps it
        model.gate.set()
        await until((hive.tasks_dir / "t1.md").exists, "t1 is back in tasks/")
        assert not held.exists()
        await asyncio.sleep(0.3)
        assert model.calls == 1  # no follow-up cycle while paused
        steering.resume(hive, "ann")
        await until(lambda: model.calls == 2, "ann takes t1 again once resumed")
    finally:
        daemon.stop("signal")
        await running


async def test_a_rom_with_enabled_false_pauses_until_the_rom_says_otherwise(hive: Hive) -> None:
    rom = write_agent(hive, "ann", front="enabled: false\n")
    write_task(hive, "t1")
    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions())
    running = asyncio.ensure_future(daemon.run())
    try:
        await until(hive.status_file.exists, "the daemon writes its status")
        await asyncio.sleep(0.5)
        assert (hive.tasks_dir / "t1.md").exists()
        assert status(hive)["agents"]["ann"]["state"] == "paused (enabled: false in its ROM)"
        rom.write_text(rom.read_text().replace("enabled: false", "enabled: true"))
        await until((hive.done_dir / "t1.md").exists, "ann does t1 once enabled")
    finally:
        daemon.stop("signal")
        await running


def refusing(body: Any) -> Reply:
    return Reply(401, error_body("authentication_error", "invalid x-api-key"))


async def test_resume_lifts_the_pause_the_daemon_made_after_a_refused_key(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = refusing
        daemon = Daemon(hive, fast_config(hive), provider(api), RunOptions(backoff=0.01))
        running = asyncio.ensure_future(daemon.run())
        try:
            await until(lambda: "ann" in daemon.runners
                        and daemon.runners["ann"].model_pause is not None, "ann pauses")
            await until((hive.tasks_dir / "t1.md").exists, "t1 is given back")
            api.responder = task_completer  # the key was fixed
            steering.resume(hive, "ann")
            await until((hive.done_dir / "t1.md").exists, "ann does t1 once resumed")
            assert daemon.runners["ann"].model_pause is None
        finally:
            daemon.stop("signal")
            await running
