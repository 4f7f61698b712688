"""An unknown model that comes from hive.toml's `[agents] model` is said as hive.toml's,
not as a slip of each ROM that names no model (where the person would look in vain)."""

from __future__ import annotations

import pytest

from hivemind.cli.hive_status import hive_status
from hivemind.hive.layout import Hive
from tests.helpers import write_agent

HIVE_TOML = "it is hive.toml's [agents] model: this ROM names none"


@pytest.mark.parametrize("front", ["", "model: inherit\n"], ids=["none", "inherit"])
def test_the_hives_unknown_model_is_said_as_hive_tomls(hive: Hive, front: str) -> None:
    hive.config_file.write_text('[agents]\nmodel = "claude-sonet-5-5"\n')
    write_agent(hive, "ann", front)
    [warning] = hive_status(hive).agents[0].warnings
    assert warning.startswith("model 'claude-sonet-5-5' is not a known model id")
    assert warning.endswith(f"({HIVE_TOML})")


def test_a_roms_own_unknown_model_is_said_as_the_roms(hive: Hive) -> None:
    write_agent(hive, "ann", "model: claude-sonet-5-5\n")
    [warning] = hive_status(hive).agents[0].warnings
    assert warning.startswith("model 'claude-sonet-5-5' is not a known model id")
    assert HIVE_TOML not in warning
