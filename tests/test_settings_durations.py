"""Durations as people write them (`5m`, `1h30m`, `90s`) wherever seconds are taken."""

from __future__ import annotations

import os
import time

import pytest

from hivemind.errors import ConfigError
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.settings import AgentSettings


def write_rom(hive: Hive, name: str, front: str) -> None:
    path = hive.rom_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}\n---\nWork.\n")
    stamp = time.time() - 10 + len(front) / 1000  # a distinct mtime per edit
    os.utime(path, (stamp, stamp))


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        pytest.param("5m", 300.0, id="minutes"),
        pytest.param("1h30m", 5400.0, id="hours-and-minutes"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("90", 90.0, id="plain-number-is-seconds"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1h 30m", 5400.0, id="spaced"),
    ],
)
def test_rom_heartbeat_takes_a_duration(hive: Hive, written: str, seconds: float) -> None:
    write_rom(hive, "ann", f"heartbeat: {written}")
    assert RomRegistry(hive, AgentSettings()).load("ann").heartbeat == seconds


def test_a_bad_duration_names_the_field_keeps_the_last_good_rom(hive: Hive) -> None:
    roms = RomRegistry(hive, AgentSettings())
    write_rom(hive, "ann", "heartbeat: 5m")
    assert roms.load("ann").heartbeat == 300
    write_rom(hive, "ann", "heartbeat: 5 minutes")
    assert roms.load("ann").heartbeat == 300
    assert roms.error("ann") == (
        "agents/ann/ROM.md: line 2: heartbeat: '5 minutes' is not a duration; "
        "write 5m, 1h30m or 90s"
    )


def test_hive_toml_takes_durations_in_every_seconds_setting(hive: Hive) -> None:
    hive.config_file.write_text(
        '[agents]\nheartbeat = "1h"\n'
        '[daemon]\nrescan_interval = "2s"\nsettle_time = "50ms"\ngrace_period = "1m"\n'
        'give_up_after = "1h30m"\n'
        '[provider]\ntimeout = "2m"\n'
    )
    config = load_hive_config(hive)
    assert config.agents.heartbeat == 3600
    daemon = config.daemon
    assert (daemon.rescan_interval, daemon.settle_time, daemon.grace_period,
            daemon.give_up_after) == (2, 0.05, 60, 5400)
    assert config.provider.timeout == 120


@pytest.mark.parametrize("written", ["5 minutes", "5x", "m", "1h30", "", "1e400"])
def test_a_bad_duration_in_hive_toml_is_one_line_with_an_example(
    hive: Hive, written: str
) -> None:
    hive.config_file.write_text(f'[daemon]\ngrace_period = "{written}"\n')
    with pytest.raises(ConfigError) as caught:
        load_hive_config(hive)
    assert str(caught.value) == (
        f"{hive.config_file}: line 2: daemon.grace_period: {written!r} is not a duration; "
        "write 5m, 1h30m or 90s"
    )


def test_a_duration_still_respects_the_bounds(hive: Hive) -> None:
    hive.config_file.write_text('[daemon]\nrescan_interval = "0s"\n')
    with pytest.raises(ConfigError, match=r"daemon.rescan_interval must be > 0"):
        load_hive_config(hive)
