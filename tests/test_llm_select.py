"""Choosing the provider from settings and the environment; pricing; the base models."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from hivemind.errors import ConfigError
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.llm.base import AssistantTurn, ToolResultsTurn, Turn, Usage
from hivemind.llm.pricing import estimate_cost
from hivemind.llm.select import make_provider
from hivemind.settings import DEFAULT_PRICES, Price, ProviderSettings
from tests.fake_anthropic import FakeAnthropic
from tests.test_llm_anthropic import make_request


@pytest.mark.parametrize(
    ("name", "env", "offline", "expected"),
    [
        ("auto", {"ANTHROPIC_API_KEY": "sk-test"}, False, "anthropic"),
        ("auto", {"ANTHROPIC_AUTH_TOKEN": "tok"}, False, "anthropic"),
        ("anthropic", {"ANTHROPIC_API_KEY": "sk-test"}, False, "anthropic"),
        ("offline", {"ANTHROPIC_API_KEY": "sk-test"}, False, "offline"),
        ("auto", {"ANTHROPIC_API_KEY": "sk-test"}, True, "offline"),
        ("auto", {}, True, "offline"),
    ],
    ids=["key", "auth-token", "anthropic", "offline-in-hive-toml", "offline-flag",
         "offline-flag-no-key"],
)
async def test_make_provider_picks_by_setting_flag_and_env(
    name: str, env: dict[str, str], offline: bool, expected: str
) -> None:
    provider = make_provider(ProviderSettings(name=name), env, offline=offline)
    try:
        assert provider.name == expected
        assert provider.offline is (expected == "offline")
    finally:
        await provider.aclose()


@pytest.mark.parametrize("name", ["auto", "anthropic"])
@pytest.mark.parametrize(
    "env", [{}, {"ANTHROPIC_API_KEY": ""}, {"ANTHROPIC_API_KEY": "  "}],
    ids=["no-key", "empty-key", "blank-key"],
)
def test_without_credentials_nothing_runs_offline_unasked(name: str, env: dict[str, str]) -> None:
    """No key used to mean the offline provider, quietly, even for agents whose ROM names
    a model: real tasks ended in done/ with mechanical results."""
    with pytest.raises(ConfigError) as caught:
        make_provider(ProviderSettings(name=name), env)
    said = str(caught.value)
    assert "\n" not in said
    assert "$ANTHROPIC_API_KEY" in said and "$ANTHROPIC_AUTH_TOKEN" in said
    assert "--offline" in said


def test_a_missing_key_names_the_variable_hive_toml_names() -> None:
    with pytest.raises(ConfigError, match=r"\$MY_KEY \(or \$ANTHROPIC_AUTH_TOKEN\)"):
        make_provider(ProviderSettings(name="anthropic", api_key_env="MY_KEY"), {})


async def sent_authorization(env: dict[str, str], api_key_env: str = "ANTHROPIC_API_KEY") -> str:
    """The Authorization header a request carries, with the credentials of `env`."""
    with FakeAnthropic() as api:
        settings = ProviderSettings(api_key_env=api_key_env, base_url=api.base_url)
        provider = make_provider(settings, env)
        try:
            await provider.complete(make_request())
        finally:
            await provider.aclose()
        return api.requests[-1].headers["authorization"]


async def test_the_key_comes_from_the_configured_variable() -> None:
    with pytest.raises(ConfigError):
        make_provider(ProviderSettings(api_key_env="MY_KEY"), {"ANTHROPIC_API_KEY": "sk-other"})
    env = {"MY_KEY": "sk-mine", "ANTHROPIC_API_KEY": "sk-other"}
    assert await sent_authorization(env, "MY_KEY") == "Bearer sk-mine"


@pytest.mark.parametrize(
    ("env", "sent"),
    [({"ANTHROPIC_AUTH_TOKEN": "tok-1"}, "Bearer tok-1"),
     ({"ANTHROPIC_AUTH_TOKEN": "tok-1", "ANTHROPIC_API_KEY": "sk-2"}, "Bearer sk-2")],
    ids=["token-alone", "key-wins"],
)
async def test_an_auth_token_is_sent_as_the_sdk_sends_it(env: dict[str, str], sent: str) -> None:
    """ANTHROPIC_AUTH_TOKEN was ignored: with it alone, the run went offline."""
    assert await sent_authorization(env) == sent


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
