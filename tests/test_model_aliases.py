"""Model aliases (`model: sonnet`) resolved through hive.toml's `[models]` table."""

from __future__ import annotations

import json
import tomllib

import pytest

from hivemind.cli.hive_status import hive_status
from hivemind.errors import ConfigError
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.hive.scaffold import render_hive_toml
from hivemind.settings import DEFAULT_MODEL_ALIASES, HiveConfig
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import task_completer


def registry(hive: Hive) -> RomRegistry:
    config = load_hive_config(hive)
    return RomRegistry(hive, config.agents, models=config.models)


@pytest.mark.parametrize(
    ("written", "model"),
    [
        pytest.param("sonnet", "claude-sonnet-5-5", id="sonnet"),
        pytest.param("opus", "claude-opus-5-5", id="opus"),
        pytest.param("haiku", "claude-haiku-5-5", id="haiku"),
        pytest.param("Opus", "claude-opus-5-5", id="any-case"),
        pytest.param("claude-haiku-5-5", "claude-haiku-5-5", id="an-id-stays"),
        pytest.param("my-local-model", "my-local-model", id="unknown-stays"),
    ],
)
def test_rom_model_alias_resolves_to_its_id(hive: Hive, written: str, model: str) -> None:
    write_agent(hive, "ann", f"model: {written}\n")
    assert registry(hive).load("ann").model == model


def test_models_table_adds_an_alias_and_can_move_one(hive: Hive) -> None:
    hive.config_file.write_text(
        '[models]\nfast = "claude-haiku-5-5"\nsonnet = "claude-sonnet-5-5-20270101"\n')
    write_agent(hive, "ann", "model: fast\n")
    write_agent(hive, "bob", "model: sonnet\n")
    write_agent(hive, "cy", "model: opus\n")
    roms = registry(hive)
    assert [roms.load(n).model for n in ("ann", "bob", "cy")] == [
        "claude-haiku-5-5", "claude-sonnet-5-5-20270101", "claude-opus-5-5"]


def test_hive_wide_model_alias_resolves_too(hive: Hive) -> None:
    hive.config_file.write_text('[agents]\nmodel = "haiku"\n')
    write_agent(hive, "ann")
    assert registry(hive).load("ann").model == "claude-haiku-5-5"


def test_inherit_as_claude_code_says_it_takes_the_hive_model(hive: Hive) -> None:
    hive.config_file.write_text('[agents]\nmodel = "opus"\n')
    write_agent(hive, "ann", "model: inherit\n")
    assert registry(hive).load("ann").model == "claude-opus-5-5"


def test_an_empty_model_id_in_the_table_is_one_line(hive: Hive) -> None:
    hive.config_file.write_text('[models]\nfast = ""\n')
    with pytest.raises(ConfigError) as caught:
        load_hive_config(hive)
    assert "models: 'fast' = '': an alias and its model id are text" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_status_shows_the_resolved_id(hive: Hive) -> None:
    write_agent(hive, "ann", "model: opus\n")
    assert hive_status(hive).agents[0].model == "claude-opus-5-5"


def test_request_carries_the_resolved_id_and_the_cycle_is_priced(hive: Hive) -> None:
    write_agent(hive, "worker", "model: haiku\n")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = task_completer
        run_until_idle(hive, scripted_model.provider(api, "sk-ant-test-key", 0))
        sent = api.message_requests[0].body["model"]
    assert sent == "claude-haiku-5-5"
    cycles = [json.loads(line) for line in hive.audit_path("worker").read_text().splitlines()]
    priced = [c for c in cycles if "cost" in c]
    assert priced and not any(c.get("unpriced_model") for c in cycles)
    haiku = HiveConfig().pricing["claude-haiku-5-5"]
    usage = priced[0]["usage"]
    assert priced[0]["cost"] == pytest.approx(
        (usage["input_tokens"] * haiku.input + usage["output_tokens"] * haiku.output) / 1e6)


def test_generated_hive_toml_shows_the_models_table() -> None:
    text = render_hive_toml()
    assert "# [models]" in text and '# sonnet = "claude-sonnet-5-5"' in text
    live = "\n".join(line.removeprefix("# ") for line in text.splitlines()
                     if line.startswith(("# [models]", "# opus", "# sonnet", "# haiku")))
    assert tomllib.loads(live)["models"] == DEFAULT_MODEL_ALIASES
    assert HiveConfig.model_validate(tomllib.loads(live)) == HiveConfig()
