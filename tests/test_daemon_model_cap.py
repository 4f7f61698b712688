"""The cap on model calls in flight at once (hive.toml `[daemon] max_concurrent_calls`)."""

from __future__ import annotations

import asyncio

import pytest

from hivemind.hive.layout import Hive
from hivemind.llm.base import ModelRequest, ModelResponse
from tests.helpers import CountingProvider, run_until_idle, write_agent, write_task

AGENTS = 8


class SlowProvider(CountingProvider):
    """The offline provider, taking a while per call and noting how many are in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = 0
        self.most = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.05)
            return await super().complete(request)
        finally:
            self.in_flight -= 1


@pytest.mark.parametrize(("toml", "cap"), [("", 4), ("max_concurrent_calls = 2\n", 2)],
                         ids=["default-4", "set-to-2"])
def test_no_more_model_calls_run_at_once_than_the_cap(hive: Hive, toml: str, cap: int) -> None:
    hive.config_file.write_text(f"[daemon]\nworkers = 1\n{toml}")
    for i in range(AGENTS):
        write_agent(hive, f"a{i}")
        write_task(hive, f"t{i}", front=f"assignee: a{i}\n")
    provider = SlowProvider()

    run_until_idle(hive, provider)

    assert len(list(hive.done_dir.glob("*.md"))) == AGENTS
    assert provider.most == cap  # reached, never passed: eight agents wanted to call at once
