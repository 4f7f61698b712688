"""The agent's model rates its memories' importance: one request after a cycle's own
calls, within 5 % of its tokens, never on an idle hive, never fatal (real SDK, fake API)."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.ltm.rating import RATING_PROMPT, RatingBudget
from hivemind.ltm.records import ImportanceSource
from hivemind.ltm.store import LongTermMemory
from tests.fake_anthropic import FakeAnthropic, Reply, error_reply, message_body
from tests.helpers import CountingProvider, run_until_idle, write_agent, write_task
from tests.scripted_model import active_tasks, is_first_round, text_reply, tool_use


def system_of(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else "".join(b["text"] for b in system)


def is_rating(body: dict[str, Any]) -> bool:
    return system_of(body).startswith(RATING_PROMPT[:40])


class NoteTaker:
    """A model that remembers `notes` (no importance given) and completes its tasks; asked
    to rate, it answers `answer` (or the error reply)."""

    def __init__(self, notes: list[str], answer: str | Reply, *, agent_input: int = 20_000,
                 rating_input: int = 300) -> None:
        self.notes, self.answer = notes, answer
        self.agent_usage = {"input_tokens": agent_input}
        self.rating_usage = {"input_tokens": rating_input}
        self.ratings: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_rating(body):
            self.ratings.append(body)
            if isinstance(self.answer, Reply):
                return self.answer
            return text_reply(self.answer, usage=self.rating_usage)
        if not is_first_round(body):
            return text_reply("noted", usage=self.agent_usage)
        calls = [tool_use(i, "remember", content=note) for i, note in enumerate(self.notes)]
        calls += [tool_use(9, "complete_task", task_id=t, result="noted")
                  for t in active_tasks(body)]
        return Reply(body=message_body(calls, stop_reason="tool_use", usage=self.agent_usage))


def run(hive: Hive, model: NoteTaker, api: FakeAnthropic) -> None:
    api.responder = model
    provider = AnthropicProvider(api_key="k", base_url=api.base_url, timeout=5, max_retries=0)
    run_until_idle(hive, provider)


def stored(hive: Hive) -> dict[str, tuple[float, ImportanceSource | None]]:
    with LongTermMemory(hive) as ltm:
        return {r.content: (r.importance, r.importance_by) for r in ltm.backend.list_all()}


def memory_ops(hive: Hive, op: str) -> list[dict[str, Any]]:
    records = [json.loads(x) for x in hive.audit_path("worker").read_text().splitlines()]
    return [m for r in records for m in (r.get("effects") or {}).get("memories") or []
            if m.get("op") == op]


NOTES = [
    "The hive scale read 42 kg after the honey flow.",
    "Lunch was fine.",
    "We decided to move the apiary to the orchard in May.",
]


def test_one_request_rates_the_cycles_memories_and_bad_lines_are_ignored(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Note what you see at the apiary.", front="project: apiary\n")
    answer = "Here are my ratings:\n1: 6\n2: 1\n3: 14\nm-deadbeef00000000: 9\nThanks!"
    model = NoteTaker(NOTES, answer)
    with FakeAnthropic() as api:
        run(hive, model, api)

    assert len(model.ratings) == 1  # one request for all three
    asked = model.ratings[0]["messages"][0]["content"]
    assert all(note in json.dumps(asked) for note in NOTES)
    after = stored(hive)
    assert after[NOTES[0]] == (0.556, ImportanceSource.MODEL)
    assert after[NOTES[1]] == (0.0, ImportanceSource.MODEL)
    assert after[NOTES[2]][1] is ImportanceSource.HEURISTIC  # 14 is out of range: still waits
    [rate] = memory_ops(hive, "rate")
    assert len(rate["asked"]) == 3 and len(rate["rated"]) == 2
    assert rate["tokens"] == 300 + 5
    with LongTermMemory(hive) as ltm:
        budget = RatingBudget.load(ltm.backend, "worker")
    assert budget.rating_tokens == 305
    shown = CliRunner().invoke(app, ["log", "worker", "--hive", str(hive.root)])
    assert "importance rated by the model: 2 of 3 memories (305 tokens)" in shown.stdout


def test_an_idle_hive_makes_no_request_even_with_memories_waiting(hive: Hive) -> None:
    write_agent(hive, "worker")
    with LongTermMemory(hive) as ltm:
        ltm.remember("an unrated note", agent="worker", scope="global")
        RatingBudget(agent_tokens=10**6).save(ltm.backend, "worker")  # plenty of budget
    with FakeAnthropic() as api:
        run(hive, NoteTaker([], "1: 9"), api)
        assert api.message_requests == []
    assert stored(hive)["an unrated note"][1] is ImportanceSource.HEURISTIC


def test_rating_stops_once_it_spent_its_share_of_the_agents_tokens(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Note the weather.", front="project: apiary\n")
    # The cycle's one call spends 4,005 tokens, so 5 % lets one request rate both notes;
    # the rating then costs 1,005 tokens, far over the share, and rates only the first.
    model = NoteTaker(["It rained all morning.", "The wind came from the west."], "1: 9",
                      agent_input=4_000, rating_input=1_000)
    with FakeAnthropic() as api:
        run(hive, model, api)
        assert len(model.ratings) == 1
        write_task(hive, "t2", "Note the weather again.", front="project: apiary\n")
        model.notes = ["Sunny afternoon."]
        run(hive, model, api)

    assert len(model.ratings) == 1  # over budget: the second cycle asked nothing
    with LongTermMemory(hive) as ltm:
        budget = RatingBudget.load(ltm.backend, "worker")
    assert budget.rating_tokens == 1_005
    assert budget.agent_tokens == 2 * 4_005  # both cycles counted
    after = stored(hive)
    assert after["It rained all morning."][1] is ImportanceSource.MODEL
    assert after["The wind came from the west."][1] is ImportanceSource.HEURISTIC
    assert after["Sunny afternoon."][1] is ImportanceSource.HEURISTIC


def test_a_failed_rating_request_leaves_the_cycle_done_and_the_memories_waiting(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Note what you see.", front="project: apiary\n")
    model = NoteTaker(NOTES[:1], error_reply(500, "api_error", "Internal server error"))
    with FakeAnthropic() as api:
        run(hive, model, api)

    assert len(model.ratings) == 1
    assert list(hive.done_dir.glob("t1*.md"))  # the task was completed all the same
    assert stored(hive)[NOTES[0]][1] is ImportanceSource.HEURISTIC
    [rate] = memory_ops(hive, "rate")
    assert "error" in rate


def test_the_offline_provider_keeps_the_heuristic(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Say hello.")
    with LongTermMemory(hive) as ltm:
        ltm.remember("an unrated note", agent="worker", scope="global")
        RatingBudget(agent_tokens=10**6).save(ltm.backend, "worker")
    provider = CountingProvider()
    run_until_idle(hive, provider)
    assert provider.requests  # the cycle ran
    assert not any(r.system.startswith(RATING_PROMPT[:40]) for r in provider.requests)
    assert stored(hive)["an unrated note"][1] is ImportanceSource.HEURISTIC


def test_a_model_that_cannot_rate_soon_stops_being_asked(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Note the weather.", front="project: apiary\n")
    # Each cycle's one call spends 4,005 tokens: under the full 5 % a second request
    # would fit after the first, but the first rated nothing, which halves the share.
    model = NoteTaker(["It rained all morning."], "I think this one matters quite a lot.",
                      agent_input=4_000, rating_input=100)
    with FakeAnthropic() as api:
        run(hive, model, api)
        write_task(hive, "t2", "Note the weather again.", front="project: apiary\n")
        model.notes = ["Sunny afternoon."]
        run(hive, model, api)

    assert len(model.ratings) == 1
    with LongTermMemory(hive) as ltm:
        budget = RatingBudget.load(ltm.backend, "worker")
    assert budget.misses == 1 and budget.agent_tokens == 2 * 4_005
