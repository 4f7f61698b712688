"""Temp files of a killed process are removed when the daemon starts; nothing else is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hivemind.fs.atomic import temp_name, write_temp
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.leftovers import parked_name, restore_parked, sweep_temps, writer_pid
from tests.helpers import run_until_idle, write_agent

ROOT = Path(__file__).resolve().parents[1]


def temps_of_a_killed_process(hive: Hive, folders: list[Path]) -> list[Path]:
    """Each folder gets a temp file from a process that then dies before renaming it."""
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from hivemind.fs.atomic import write_temp\n"
        "for folder in sys.argv[1:]:\n"
        "    print(write_temp(Path(folder), 'note.md', b'half a story', fsync=False))\n"
        "sys.stdout.flush()\n"
        "os._exit(9)\n"
    )
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, folders)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    assert done.returncode == 9, done.stderr
    return [Path(line) for line in done.stdout.split()]


def test_a_killed_writers_temp_files_go_and_everything_else_stays(hive: Hive) -> None:
    folders = [
        hive.mailboxes_dir / HUMAN / "tmp",
        hive.active_dir_for("ann"),
        hive.tasks_dir,
        hive.done_dir,
        hive.workspace_dir / "deep" / "down",
        hive.knowledge_dir,
    ]
    left = temps_of_a_killed_process(hive, folders)
    assert len(left) == len(folders) and all(p.exists() for p in left)
    mine = write_temp(hive.workspace_dir, "mine.md", b"being written", fsync=False)
    status = hive.state_dir / f".status.{os.getpid()}.tmp"
    status.write_text("{}")
    editors = [hive.workspace_dir / ".notes.md.tmp", hive.workspace_dir / "draft.tmp",
               hive.knowledge_dir / ".style.md.swp"]
    for path in editors:
        path.write_text("a person's file")

    removed = sweep_temps(hive)

    assert sorted(removed) == sorted(left)
    assert not any(p.exists() for p in left)
    assert mine.exists() and status.exists()
    assert all(p.exists() for p in editors)


def test_only_names_the_hive_makes_carry_a_writer() -> None:
    assert writer_pid(temp_name("t1.md")) == os.getpid()
    assert writer_pid(".status.4242.tmp") == 4242
    for name in (".notes.md.tmp", "t1.md", ".t1.md.12-abc-1.tmp", "x.4242-abcdef-1.tmp"):
        assert writer_pid(name) is None


def test_the_daemon_removes_them_when_it_starts(hive: Hive) -> None:
    write_agent(hive, "worker")
    left = temps_of_a_killed_process(hive, [hive.mailboxes_dir / "worker" / "tmp"])

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "idle"
    assert not any(p.exists() for p in left)


def a_dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_a_task_a_killed_command_parked_is_put_back_and_run(hive: Hive) -> None:
    write_agent(hive, "worker")
    parked = hive.tasks_dir / parked_name("t1.md", a_dead_pid())
    parked.write_text("---\nid: t1\nassignee: worker\n---\nDo it.\n")
    swept = sweep_temps(hive)
    assert parked not in swept and parked.exists()  # a person's task is never removed

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "idle"
    assert not parked.exists()
    assert (hive.done_dir / "t1.md").exists()


def test_a_parked_task_of_a_live_command_stays_and_none_is_replaced(hive: Hive) -> None:
    mine = hive.tasks_dir / parked_name("t1.md", os.getpid())
    mine.write_text("# mine\n")
    dead = hive.failed_dir / parked_name("t2.md", a_dead_pid())
    hive.failed_dir.mkdir(parents=True, exist_ok=True)
    dead.write_text("# parked\n")
    (hive.failed_dir / "t2.md").write_text("# already there\n")

    restored = restore_parked(hive)

    assert mine.exists()
    assert restored == [hive.failed_dir / "t2-1.md"]
    assert (hive.failed_dir / "t2.md").read_text() == "# already there\n"
    assert restored[0].read_text() == "# parked\n"
