"""Usage figures come from someone else's endpoint: out of bounds, they are clamped and
said, never counted as they came (a budget, a cost, the run's summary)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hivemind.hive.layout import Hive
from hivemind.llm.usage_bounds import MAX_PROMPT_TOKENS
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import task_completer


def audit(hive: Hive, agent: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in hive.audit_path(agent).read_text().splitlines() if x]


@pytest.mark.parametrize(
    ("figures", "counted", "named"),
    [
        ({"input_tokens": 1e30}, {"input_tokens": MAX_PROMPT_TOKENS}, "input_tokens=1e+30"),
        ({"cache_read_input_tokens": -7}, {"cache_read_tokens": 0}, "cache_read_input_tokens=-7"),
        ({"input_tokens": "lots"}, {"input_tokens": 0}, "input_tokens='lots'"),
        ({"output_tokens": 10**9}, {"output_tokens": 4096}, "output_tokens=1000000000"),
    ],
    ids=["absurd", "negative", "no-number", "over-max-tokens"],
)
def test_usage_out_of_bounds_is_clamped_and_said(
    hive: Hive, figures: dict[str, Any], counted: dict[str, int], named: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    hive.config_file.write_text('[pricing."claude-sonnet-5-5"]\ninput = 3.0\noutput = 15.0\n'
                                'cache_write = 3.75\ncache_read = 0.3\n')
    write_agent(hive, "worker", front="model: claude-sonnet-5-5\nmax_output_tokens: 4096\n")
    write_task(hive, "t1")

    def completer(body: Any) -> Reply:
        reply = task_completer(body)
        reply.body["usage"] = {**reply.body["usage"], **figures}
        return reply

    with FakeAnthropic() as api:
        api.responder = completer
        daemon = run_until_idle(hive, scripted_model.provider(api))

    records = audit(hive, "worker")
    [cycle] = [r for r in records if r["event"] == "cycle"]
    for field, value in counted.items():
        assert cycle["usage"][field] == value  # one call: complete_task ended the turn
        assert getattr(daemon.totals.usage, field) == value
    assert cycle["cost"] < 100.0 and daemon.totals.cost < 100.0
    notes = [r["note"] for r in records if r["event"] == "usage_clamped"]
    assert len(notes) == 1 and all(named in n for n in notes)
    assert named in caplog.text
    assert (hive.done_dir / "t1.md").exists()  # the work itself went on


def test_a_cycle_a_bug_ends_counts_its_tokens_and_its_record_says_why(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hivemind.agent.toolrun import ToolRunner

    def bug(*_: object) -> bool:
        raise RuntimeError("a bug after the model call")

    monkeypatch.setattr(ToolRunner, "break_loops", bug)  # hit once the calls have run
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = task_completer
        daemon = run_until_idle(hive, scripted_model.provider(api), timeout=20)
        calls = len(api.message_requests)

    cycles = [r for r in audit(hive, "worker") if r["event"] == "cycle"]
    assert cycles and all(r["error"] == "RuntimeError: a bug after the model call"
                          for r in cycles)
    assert calls >= 1 and daemon.totals.usage.input_tokens == 10 * calls
    assert daemon.totals.errors == daemon.totals.cycles == len(cycles)
