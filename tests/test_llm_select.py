"""Choosing the provider from settings and the environment; pricing; the base models."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from hivemind.errors import ConfigError
from hivemind.hive.models import DEFAULT_PRICES, Price, ProviderSettings
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.llm.base import AssistantTurn, ToolResultsTurn, Turn, Usage
from hivemind.llm.offline import OfflineProvider
from hivemind.llm.pricing import estimate_cost
from hivemind.llm.select import make_provider
from tests.fake_anthropic import FakeAnthropic


@pytest.mark.parametrize(
    ("name", "env", "expected"),
    [
        ("auto", {}, "offline"),
        ("auto", {"ANTHROPIC_API_KEY": ""}, "offline"),
        ("auto", {"ANTHROPIC_API_KEY": "  "}, "offline"),
        ("auto", {"ANTHROPIC_API_KEY": "sk-test"}, "anthropic"),
        ("offline", {"ANTHROPIC_API_KEY": "sk-test"}, "offline"),
        ("anthropic", {"ANTHROPIC_API_KEY": "sk-test"}, "anthropic"),
    ],
    ids=[
        "auto-no-key",
        "auto-empty-key",
        "auto-blank-key",
        "auto-key",
        "offline-forced",
        "anthropic",
    ],
)
async def test_make_provider_picks_by_setting_and_env(
    name: str, env: dict[str, str], expected: str
) -> None:
    provider = make_provider(ProviderSettings(name=name), env)
    try:
        assert provider.name == expected
        assert provider.offline is (expected == "offline")
    finally:
        await provider.aclose()


def test_anthropic_without_a_key_says_which_variable_to_set() -> None:
    with pytest.raises(ConfigError, match="MY_KEY"):
        make_provider(ProviderSettings(name="anthropic", api_key_env="MY_KEY"), {})


async def test_the_key_comes_from_the_configured_variable() -> None:
    settings = ProviderSettings(api_key_env="MY_KEY")
    provider = make_provider(settings, {"ANTHROPIC_API_KEY": "sk-other"})
    assert isinstance(provider, OfflineProvider)
    provider = make_provider(settings, {"MY_KEY": "sk-mine"})
    assert isinstance(provider, AnthropicProvider)
    await provider.aclose()


@pytest.mark.parametrize(
    ("settings_url", "env_url", "expected"),
    [(None, None, "api.anthropic.com"), (None, "FAKE", "127.0.0.1"),
     ("FAKE", None, "127.0.0.1"), ("http://bad.invalid", "FAKE", "127.0.0.1")],
    ids=["sdk-default", "env", "settings", "env-wins"],
)
async def test_base_url_comes_from_the_env_then_settings(
    settings_url: str | None, env_url: str | None, expected: str
) -> None:
    """Where the key goes is the user's decision: $ANTHROPIC_BASE_URL wins over hive.toml."""
    with FakeAnthropic() as api:
        env = {"ANTHROPIC_API_KEY": "sk-test"}
        if env_url:
            env["ANTHROPIC_BASE_URL"] = api.base_url
        url = api.base_url if settings_url == "FAKE" else settings_url
        provider = make_provider(ProviderSettings(name="anthropic", base_url=url), env)
        assert isinstance(provider, AnthropicProvider)
        assert provider.endpoint.split(":")[0] == expected
        await provider.aclose()


# -- pricing ------------------------------------------------------------------------


def test_cost_adds_the_four_token_figures_at_their_prices() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        cache_read_tokens=1_000_000,
    )
    assert estimate_cost(usage, "claude-sonnet-5-5", DEFAULT_PRICES) == pytest.approx(
        3.0 + 15.0 + 3.75 + 0.3
    )


def test_a_dated_model_id_is_priced_by_its_longest_known_prefix() -> None:
    prices = {
        "claude-opus": Price(input=1, output=1, cache_write=1, cache_read=1),
        "claude-opus-5-5": Price(input=10, output=0, cache_write=0, cache_read=0),
    }
    usage = Usage(input_tokens=100_000)
    assert estimate_cost(usage, "claude-opus-5-5-20260101", prices) == pytest.approx(1.0)
    assert estimate_cost(usage, "claude-opus-4", prices) == pytest.approx(0.1)


def test_an_unknown_model_has_no_cost() -> None:
    assert estimate_cost(Usage(input_tokens=10), "gpt-4", DEFAULT_PRICES) is None
    assert estimate_cost(Usage(input_tokens=10), "offline", DEFAULT_PRICES) is None


# -- base models --------------------------------------------------------------------


def test_usage_adds_up_and_knows_its_cache_share() -> None:
    total = Usage(input_tokens=10, output_tokens=5, cache_write_tokens=30) + Usage(
        input_tokens=10, output_tokens=5, cache_read_tokens=50
    )
    assert total == Usage(
        input_tokens=20, output_tokens=10, cache_write_tokens=30, cache_read_tokens=50
    )
    assert total.total_input == 100
    assert total.cache_hit_share == pytest.approx(0.5)
    assert Usage().cache_hit_share == 0.0


def test_turns_round_trip_through_their_discriminator() -> None:
    adapter: TypeAdapter[list[Turn]] = TypeAdapter(list[Turn])
    data = [
        {"kind": "assistant", "text": "hi", "tool_calls": [{"id": "1", "name": "x", "input": {}}]},
        {"kind": "tool_results", "results": [{"tool_use_id": "1", "content": "ok"}]},
    ]
    turns = adapter.validate_python(data)
    assert isinstance(turns[0], AssistantTurn) and isinstance(turns[1], ToolResultsTurn)
    assert adapter.validate_json(adapter.dump_json(turns)) == turns
