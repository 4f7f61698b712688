"""Pick the model provider from `[provider]` of hive.toml and the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import ValidationError

from hivemind.errors import ConfigError
from hivemind.llm.base import Provider
from hivemind.llm.offline import OfflineProvider
from hivemind.problems import first_problem
from hivemind.settings import ProviderSettings

BASE_URL_ENV = "ANTHROPIC_BASE_URL"
AUTH_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"


def credential(
    settings: ProviderSettings, env: Mapping[str, str] = os.environ
) -> tuple[str, str]:
    """(the variable, its value) of the credential to send, as the SDK picks it: the API
    key first, else a bearer token; a one-line refusal when neither is set."""
    for name in (settings.api_key_env, AUTH_TOKEN_ENV):
        value = env.get(name, "").strip()
        if value:
            return name, value
    raise ConfigError(
        f"no model credentials: set ${settings.api_key_env} (or ${AUTH_TOKEN_ENV}), or run "
        'with --offline (or set [provider] name = "offline" in hive.toml) to use the offline '
        "provider, which calls no model"
    )


def wants_offline(settings: ProviderSettings, offline: bool = False) -> bool:
    """True if the offline provider was asked for: `--offline` or `name = "offline"`."""
    return offline or settings.name == "offline"


def make_provider(
    settings: ProviderSettings, env: Mapping[str, str] = os.environ, *, offline: bool = False
) -> Provider:
    """The offline provider only when asked (`offline`, or `[provider] name = "offline"`);
    else Anthropic, which needs credentials: without them, a one-line refusal."""
    if wants_offline(settings, offline):
        return OfflineProvider()
    key_env, key = credential(settings, env)
    # The SDK takes seconds to import: only pay for it when a key says we need it.
    from hivemind.llm.anthropic import AnthropicProvider

    base_url = settings.base_url
    if env.get(BASE_URL_ENV):  # where the key goes is the user's: the environment wins
        try:  # checked as hive.toml's is
            base_url = ProviderSettings(base_url=env[BASE_URL_ENV]).base_url
        except ValidationError as exc:
            raise ConfigError(f"${BASE_URL_ENV}: {first_problem(exc)[1]}") from None
    return AnthropicProvider(
        api_key=key,
        base_url=base_url,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        key_env=key_env,
        bearer=key_env == AUTH_TOKEN_ENV,
    )
