"""Shared fixtures: a real temporary hive; no test may reach the network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hivemind.hive.layout import Hive

# Never let a test pick up a real key or endpoint from the environment.
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("ANTHROPIC_BASE_URL", None)
os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")


@pytest.fixture(autouse=True)
def user_config_home(tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's config folder (`hivemind trust` records): a temp one, never the real."""
    home = tmp_path_factory.mktemp("config-home")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


@pytest.fixture
def hive(tmp_path: Path) -> Hive:
    """An empty hive with every folder of the layout."""
    return Hive(tmp_path / "hive").ensure()
