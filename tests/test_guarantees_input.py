"""Bad input, generated (hypothesis): nothing dropped is lost, nothing crashes the daemon.

The properties live in `bench/fuzz_harness.py`, which runs them for >= 10 000
cases; here they run with a hypothesis profile chosen by the `CI` variable
(`ci`: 200 examples a property; otherwise `dev`: 50).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz_harness import (
    BAD_TOMLS,
    MESSAGE_FIELDS,
    ROM_FIELDS,
    TASK_FIELDS,
    check_hive_toml,
    check_message,
    check_reason,
    check_rom_edit,
    check_task_drop,
    cli_bad_toml,
    daemon_batches,
    daemon_case,
    file_bytes,
    file_names,
    kinds,
    rejected_entries,
    scratch,
    toml_files,
)
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.errors import ConfigError
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.rom import RomRegistry
from hivemind.hive.tasks.board import TaskBoard
from hivemind.settings import AgentSettings
from tests.helpers import CountingProvider, fast_config, write_agent, write_task

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=list(HealthCheck),
    database=None,
)
settings.register_profile(
    "dev", max_examples=50, deadline=None, suppress_health_check=list(HealthCheck),
)
PROFILE = settings.get_profile("ci" if os.environ.get("CI") else "dev")
DAEMON_RUNS = settings(PROFILE, max_examples=6 if os.environ.get("CI") else 3)


@settings(PROFILE)
@given(file_names, file_bytes(TASK_FIELDS), kinds)
def test_a_dropped_task_file_is_read_or_rejected_whole_never_lost(
    name: str, data: bytes, kind: str
) -> None:
    with scratch() as root:
        check_task_drop(root / "hive", name, data, kind)


@settings(PROFILE)
@given(file_names, file_bytes(MESSAGE_FIELDS), kinds)
def test_a_message_file_is_read_unchanged_and_moves_to_cur_unchanged(
    name: str, data: bytes, kind: str
) -> None:
    with scratch() as root:
        check_message(root / "hive", name, data, kind)


@settings(PROFILE)
@given(file_bytes(ROM_FIELDS), st.sampled_from(["file"] * 8 + ["dir", "symlink-in", "fifo"]))
def test_a_bad_rom_edit_keeps_the_last_good_config(data: bytes, kind: str) -> None:
    with scratch() as root:
        check_rom_edit(root / "hive", data, kind)


@settings(PROFILE)
@given(toml_files)
def test_hive_toml_loads_or_fails_with_one_config_error_line(data: bytes) -> None:
    with scratch() as root:
        check_hive_toml(root / "hive", data)


@pytest.mark.slow
@DAEMON_RUNS
@given(daemon_batches)
def test_the_daemon_stays_up_and_accounts_for_every_file(batch: tuple[Any, Any, Any]) -> None:
    with scratch() as root:
        daemon_case(root / "hive", *batch)


@pytest.mark.slow
@pytest.mark.parametrize("data", BAD_TOMLS[:3:2], ids=["unclosed", "zero"])
def test_a_bad_hive_toml_stops_the_cli_with_one_line_and_no_traceback(
    tmp_path: Path, data: bytes
) -> None:
    cli_bad_toml(tmp_path / "hive", data)


# -- bugs the generated cases found ----------------------------------------------------------


@pytest.mark.parametrize("stem", ["a" * 245, "é" * 124], ids=["ascii", "two-byte"])
def test_a_task_file_with_a_very_long_name_is_rejected_not_crashing(hive: Hive, stem: str) -> None:
    path = hive.tasks_dir / f"{stem}.md"
    path.write_bytes(b"---\npriority: urgent\n---\nbad\n")

    assert TaskBoard(hive, settle_time=0).scan_pending() == []

    [moved] = rejected_entries(hive)
    assert moved.read_bytes() == b"---\npriority: urgent\n---\nbad\n"
    reason = check_reason(moved.with_name(moved.name + ".reason"))
    assert reason.endswith("name was too long to keep)")


def test_a_valid_task_with_a_long_name_is_claimed_and_done(hive: Hive) -> None:
    stem = "é" * 120  # a valid id (120 characters) in a 243-byte file name
    (hive.tasks_dir / f"{stem}.md").write_text("# Long\n\nDo it.\n")
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.scan_pending()

    claimed = board.claim(ref, "worker")
    assert claimed is not None
    done = board.complete(claimed, "ok", "worker")

    assert done.path == hive.done_dir / f"{stem}.md"
    assert done.path.read_text().count("## Result") == 1


# -- a folder of the layout replaced by a file -----------------------------------------------


@pytest.mark.parametrize("folder", ["tasks/done", "tasks/active", "knowledge", ".hivemind/audit"])
def test_a_file_in_place_of_a_hive_folder_stops_start_up_with_one_line(
    hive: Hive, folder: str
) -> None:
    path = hive.root / folder
    path.rmdir()
    path.write_text("a file where a folder belongs\n")

    with pytest.raises(ConfigError, match=f"{folder}: the hive needs a folder here"):
        Daemon(hive, fast_config(hive), CountingProvider(), RunOptions(until_idle=True))


@pytest.mark.slow
def test_the_cli_says_which_file_is_in_the_way_without_a_traceback(tmp_path: Path) -> None:
    hive = Hive(tmp_path / "hive").ensure()
    hive.done_dir.rmdir()
    hive.done_dir.write_text("oops\n")
    proc = subprocess.run(
        [sys.executable, "-m", "hivemind", "run", str(hive.root), "--until-idle", "--offline"],
        check=False, capture_output=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")},
    )
    err = proc.stderr.decode().strip()
    assert proc.returncode == 1 and "Traceback" not in err and err.count("\n") == 0
    assert err.startswith("error:") and "tasks/done" in err


BROKEN_FOLDERS = {  # what is replaced -> where status.json shows it (None: nothing to show)
    "tasks/active/worker": "(board)",
    "mailboxes/worker/cur": "worker",
    "mailboxes/worker/new": None,
    ".hivemind/audit/worker.jsonl": "worker",
}


@pytest.fixture(scope="module")
def broken_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Hive, Daemon]]:
    """One hive per broken folder, all run at once (the stalled ones wait 2 s each)."""
    runs: dict[str, tuple[Hive, Daemon]] = {}
    for path in BROKEN_FOLDERS:
        hive = Hive(tmp_path_factory.mktemp("broken") / "hive").ensure()
        write_agent(hive, "worker")
        write_task(hive, "t1")
        PostOffice(hive).send(HUMAN, "worker", "hello", "are you there?")
        target = hive.root / path
        if target.is_dir():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.endswith(".jsonl"):
            target.mkdir()  # a folder where the audit log belongs
        else:
            target.write_text("a file where a folder belongs\n")
        runs[path] = (hive, Daemon(hive, fast_config(hive), CountingProvider(),
                                   RunOptions(until_idle=True, idle_settle=0.2, backoff=0.01)))

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*(d.run() for _, d in runs.values())), 60)

    asyncio.run(main())
    return runs


@pytest.mark.parametrize("path", list(BROKEN_FOLDERS), ids=["active", "cur", "new", "audit"])
def test_a_folder_replaced_while_agents_work_never_stops_the_daemon(
    broken_runs: dict[str, tuple[Hive, Daemon]], path: str
) -> None:
    hive, daemon = broken_runs[path]
    shown = BROKEN_FOLDERS[path]

    assert daemon.exit_reason in ("idle", "stalled")
    status = json.loads(hive.status_file.read_text())
    if shown == "(board)":
        assert any(w["id"] == "(board)" for w in status["waiting_tasks"])
    elif shown is not None:
        assert status["agents"][shown]["last_error"]


def test_a_rom_edit_with_a_control_character_is_reported_in_one_line(hive: Hive) -> None:
    rom = write_agent(hive, "worker")
    registry = RomRegistry(hive, AgentSettings())
    good = registry.load("worker")
    rom.write_bytes(b"---\nrole: a\x00b\n---\nBe good.\n")

    assert registry.load("worker") == good
    assert registry.error("worker") == (
        "agents/worker/ROM.md: line 2: invalid YAML in front matter: "
        "control characters are not allowed"
    )
