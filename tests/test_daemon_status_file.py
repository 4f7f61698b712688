"""status.json is one typed model: what the daemon writes reads back the same, a file
of an older version or by hand still reads, and a wrong field is named."""

from __future__ import annotations

import json

import pytest

from hivemind.daemon.status import RunSnapshot, RunTotals, StatusWriter
from hivemind.daemon.status_file import DaemonStatus
from hivemind.hive.layout import Hive

KEYS = ["pid", "running", "stopped_because", "provider", "started_at", "updated_at",
        "agents", "workers", "waiting_tasks", "disk_full", "totals", "mcp_servers"]


def idle_run() -> RunSnapshot:
    """A run with no agent left, one task waiting and a full disk."""
    return RunSnapshot(provider="offline", stopped_because="idle", runners={}, workers=[],
                       waiting=[("t1", "no agent has the skill")],
                       disk_full="the disk is full", totals=RunTotals(cycles=2))


def test_the_status_written_reads_back_equal(hive: Hive) -> None:
    writer = StatusWriter(hive, idle_run)
    writer.write(final=True)
    text = hive.status_file.read_text()

    read = DaemonStatus.parse(json.loads(text))

    assert read == writer.status(final=True).model_copy(update={"updated_at": read.updated_at})
    assert list(json.loads(text)) == KEYS  # the keys on disk, in their order
    assert (read.running, read.stopped_because, read.totals.cycles) == (False, "idle", 2)
    assert [(w.id, w.why) for w in read.waiting_tasks] == [("t1", "no agent has the skill")]


def test_a_file_of_an_older_version_reads_with_defaults() -> None:
    old = {"pid": 1, "running": False, "stopped_because": "idle", "future_key": [1],
           "agents": {"ann": {"state": "idle", "cycles": 3,
                              "waiting": {"t1": "an answer from bob"}}}}

    read = DaemonStatus.parse(old)

    assert read.agents["ann"].waiting == {"t1": "an answer from bob"}
    assert read.agents["ann"].refused == [] and read.totals.cycles == 0
    assert read.model_dump()["future_key"] == [1]  # kept, not dropped


@pytest.mark.parametrize(
    ("data", "field"),
    [
        pytest.param({"agents": {"ann": "idle"}}, "agents.ann", id="agent-not-an-object"),
        pytest.param({"totals": {"cycles": "many"}}, "totals.cycles", id="count-not-a-number"),
        pytest.param([1, 2], "the file", id="not-an-object"),
    ],
)
def test_a_wrong_field_is_named(data: object, field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field}: "):
        DaemonStatus.parse(data)
