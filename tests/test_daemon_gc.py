"""The collector's pace while a daemon runs (see hivemind.daemon.gctune)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.gctune import DAEMON_GC_THRESHOLDS, daemon_gc_pace
from hivemind.hive.layout import Hive
from hivemind.llm.offline import OfflineProvider
from tests.helpers import fast_config, write_agent, write_task


@pytest.fixture
def default_pace() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield (700, 10, 10)
    gc.set_threshold(*before)


def test_cycles_run_at_the_daemon_pace_and_the_old_pace_comes_back(
    hive: Hive, default_pace: tuple[int, int, int]
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    seen: list[tuple[int, int, int]] = []
    daemon = Daemon(hive, fast_config(hive), OfflineProvider(),
                    RunOptions(until_idle=True, idle_settle=0.2),
                    on_cycle=lambda report: seen.append(gc.get_threshold()))
    asyncio.run(daemon.run())

    assert (hive.done_dir / "t1.md").is_file()
    assert seen and set(seen) == {DAEMON_GC_THRESHOLDS}
    assert gc.get_threshold() == default_pace  # a program embedding the daemon keeps its own


def test_the_old_pace_comes_back_after_an_error(default_pace: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError), daemon_gc_pace():
        assert gc.get_threshold() == DAEMON_GC_THRESHOLDS
        raise RuntimeError("boom")
    assert gc.get_threshold() == default_pace

