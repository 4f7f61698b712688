"""Small builders for test hives: agents, tasks and mail written as people write them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.llm.base import ModelRequest, ModelResponse, Provider
from hivemind.llm.offline import OfflineProvider
from hivemind.settings import HiveConfig


def write_agent(hive: Hive, name: str, front: str = "", body: str = "") -> Path:
    path = hive.rom_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    fm = f"---\nrole: {name} of the test hive\n{front}---\n"
    path.write_text(fm + (body or f"You are {name}. Do the tasks you are given.\n"))
    return path


def write_task(hive: Hive, stem: str, body: str = "Do the thing.", front: str = "") -> Path:
    path = hive.tasks_dir / f"{stem}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    fm = f"---\n{front}---\n" if front else ""
    path.write_text(f"{fm}# {stem}\n\n{body}\n")
    return path


def fast_config(hive: Hive) -> HiveConfig:
    cfg = load_hive_config(hive)
    cfg.daemon.settle_time = 0.0
    cfg.daemon.rescan_interval = 0.2
    cfg.daemon.grace_period = 5.0
    return cfg


class CountingProvider:
    """The offline provider, counting the requests it answers (a real provider, not a mock)."""

    def __init__(self, inner: Provider | None = None) -> None:
        self.inner = inner or OfflineProvider()
        self.name = self.inner.name
        self.offline = self.inner.offline
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self.inner.complete(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def run_until_idle(
    hive: Hive, provider: Provider | None = None, timeout: float = 30.0, **options: object
) -> Daemon:
    """Run a daemon on `hive` until idle (or `timeout`), and return it for inspection."""
    daemon = Daemon(
        hive, fast_config(hive), provider or OfflineProvider(),
        RunOptions(until_idle=True, idle_settle=0.2, **options),  # type: ignore[arg-type]
    )

    async def main() -> None:
        await asyncio.wait_for(daemon.run(), timeout)

    asyncio.run(main())
    return daemon


async def until(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Wait until `condition()` holds (checked every 20 ms); fail naming `what` after
    `timeout` seconds (generous: every wait ends as soon as its condition holds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


def cut_short_exit(hive: Hive) -> int:
    """The exit code of an --until-idle run stopped by a signal, as the hive stands after
    it: 3 with a task still in hand (tasks/active/), else 0."""
    return 3 if any(hive.active_dir.rglob("*.md")) else 0
