"""A price given for a model alias (`[pricing."sonnet"]`) is the price of the model
the alias names: what a cycle costs, and what `hivemind status` shows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.errors import ConfigError
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply
from tests.helpers import run_until_idle, write_agent, write_task

USAGE = {"input_tokens": 1000, "output_tokens": 200,
         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
PRICE = "input = 100.0\noutput = 1000.0\ncache_write = 10.0\ncache_read = 1.0\n"
PER_CALL = (1000 * 100.0 + 200 * 1000.0) / 1_000_000  # not the default prices


def completer(body: Any) -> Reply:
    reply = scripted_model.task_completer(body)
    reply.body["usage"] = USAGE
    return reply


def spend_today(hive: Hive, agent: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["status", str(hive.root), "--json"])
    assert result.exit_code == 0, result.output
    spend: dict[str, Any] = json.loads(result.stdout)["spend_today"][agent]
    return spend


@pytest.mark.parametrize(
    ("toml", "model"),
    [
        pytest.param(f'[pricing."sonnet"]\n{PRICE}', "sonnet", id="built-in-alias"),
        pytest.param(f'[pricing."Sonnet"]\n{PRICE}', "sonnet", id="alias-any-case"),
        pytest.param(f'[models]\nfast = "claude-haiku-5-5"\n[pricing.fast]\n{PRICE}', "fast",
                     id="own-alias"),
        pytest.param(f'[pricing."sonnet"]\n{PRICE}', "claude-sonnet-5-5", id="rom-says-the-id"),
    ],
)
def test_a_price_given_for_an_alias_prices_the_model_it_names(
    hive: Hive, toml: str, model: str
) -> None:
    hive.config_file.write_text(toml)
    write_agent(hive, "worker", f"model: {model}\n")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = completer
        daemon = run_until_idle(hive, scripted_model.provider(api))
        calls = len(api.message_requests)
    assert daemon.totals.cost == pytest.approx(calls * PER_CALL)
    spend = spend_today(hive, "worker")
    assert spend["cost_usd"] == pytest.approx(calls * PER_CALL)
    assert spend["unpriced"] is False


def test_an_alias_leaves_the_other_models_their_default_price(hive: Hive) -> None:
    hive.config_file.write_text(f'[pricing."sonnet"]\n{PRICE}')
    pricing = load_hive_config(hive).pricing
    assert pricing["claude-sonnet-5-5"].input == 100.0
    assert pricing["claude-haiku-5-5"].input == 1.0  # the default
    assert "sonnet" not in pricing  # keyed by the id the price applies to


def test_a_model_priced_twice_under_its_alias_and_its_id_is_one_line(hive: Hive) -> None:
    hive.config_file.write_text(f'[pricing."sonnet"]\n{PRICE}[pricing."claude-sonnet-5-5"]\n'
                                f"{PRICE}")
    with pytest.raises(ConfigError) as caught:
        load_hive_config(hive)
    message = str(caught.value)
    assert "'sonnet' and 'claude-sonnet-5-5' are the same model" in message
    assert "hive.toml" in message and "\n" not in message
