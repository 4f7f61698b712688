"""Pick the model provider from `[provider]` of hive.toml and the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import ValidationError

from hivemind.errors import ConfigError
from hivemind.hive.models import ProviderSettings
from hivemind.hive.problems import first_problem
from hivemind.llm.base import Provider
from hivemind.llm.offline import OfflineProvider

BASE_URL_ENV = "ANTHROPIC_BASE_URL"


def make_provider(settings: ProviderSettings, env: Mapping[str, str] = os.environ) -> Provider:
    """`offline`, `anthropic` (a key is required) or `auto` (Anthropic when the key is set)."""
    key = env.get(settings.api_key_env, "").strip()
    if settings.name == "offline" or (settings.name == "auto" and not key):
        return OfflineProvider()
    if not key:
        raise ConfigError(
            f"provider 'anthropic' needs an API key: set the environment variable "
            f'{settings.api_key_env} (or set [provider] name = "offline" in hive.toml)'
        )
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
        key_env=settings.api_key_env,
    )
