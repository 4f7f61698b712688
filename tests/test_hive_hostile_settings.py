"""hive.toml and ROM.md as hostile files: only a regular file of at most 256 KB inside
the hive is read; a FIFO, a device, a link out of the hive, a huge or a deeply nested
file is one line naming the file, never a hang, a memory blow-up or a traceback.

Commands run as subprocesses (a hang is a timeout, memory is capped), as a user runs
them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hivemind.cli.hive_status import hive_status
from hivemind.errors import ConfigError
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.settings import AgentSettings
from tests.helpers import write_agent, write_task

REPO = Path(__file__).resolve().parent.parent
WAIT = 40.0  # s: generous for a start or a stop on a slow machine
MEMORY_CAP = 2 * 1024**3  # bytes: /dev/zero read whole would pass it in a second
OFFLINE_TOML = ("[provider]\nname = \"offline\"\n\n[daemon]\nsettle_time = 0.0\n"
                "rescan_interval = 0.1\n")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _link_out(path: Path) -> None:
    root = next(p for p in path.parents if p.name == "hive")
    outside = root.parent / f"outside-{path.name}"
    outside.write_text(OFFLINE_TOML if path.suffix == ".toml" else "---\nrole: x\n---\nhi\n")
    path.symlink_to(outside)


def _hard_link_out(path: Path) -> None:
    root = next(p for p in path.parents if p.name == "hive")
    outside = root.parent / f"outside-{path.name}"
    outside.write_text(OFFLINE_TOML if path.suffix == ".toml" else "---\nrole: x\n---\nhi\n")
    os.link(outside, path)  # (`cp -a`, a tarball, rsync -H keep hard links; git does not)


def _huge(path: Path) -> None:
    head = OFFLINE_TOML if path.suffix == ".toml" else "---\nrole: big\n---\n"
    path.write_text(head + "# padding\n" * 30_000)  # 300 KB


def _nested(path: Path) -> None:
    path.write_text("a = " + "[" * 100_000 + "\n")


def _link_in(path: Path) -> None:
    inside = path.parent / "settings" / path.name
    inside.parent.mkdir(exist_ok=True)
    inside.write_text(OFFLINE_TOML)
    path.symlink_to(Path("settings") / path.name)


MAKERS: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo, "dev-zero-link": _dev_zero, "link-out-of-the-hive": _link_out,
    "hard-link-out": _hard_link_out, "over-256-KB": _huge, "100000-nested": _nested,
}
PROBLEMS = {
    "fifo": "is a named pipe (FIFO), not a regular file",
    "dev-zero-link": "is a link to a file outside the hive; it is not followed",
    "link-out-of-the-hive": "is a link to a file outside the hive; it is not followed",
    "hard-link-out": "has another name (a hard link); it is not read",
    "over-256-KB": "the limit is 262,144 (256 KB)",
    "100000-nested": "invalid TOML: arrays or tables nested too deeply",
}


CAPPED = ("import resource, runpy, sys; "
          f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP})); "
          "sys.argv[0] = 'hivemind'; runpy.run_module('hivemind', run_name='__main__')")
"""`python -m hivemind` with its memory capped."""


def hivemind(*args: str, hive: Hive) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["COLUMNS"] = "250"  # one line stays one line
    return subprocess.Popen(
        [sys.executable, "-c", CAPPED, *args, "--hive", str(hive.root)], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def finish(run: subprocess.Popen[str], what: str) -> str:
    try:
        out, _ = run.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        run.kill()
        out, _ = run.communicate()
        raise AssertionError(f"{what}: still running after {WAIT} s\n{out}") from None
    return out


def a_hive(tmp_path: Path) -> Hive:
    hive = Hive(tmp_path / "hive").ensure()
    write_agent(hive, "worker")
    write_task(hive, "t1")
    return hive


# -- hive.toml at the start -----------------------------------------------------------------


@pytest.mark.parametrize("kind", MAKERS)
@pytest.mark.parametrize("command", [["run", "--until-idle"], ["status"], ["inspect", "worker"]],
                         ids=lambda c: c[0])
def test_a_hostile_hive_toml_is_one_line_naming_it(
    tmp_path: Path, kind: str, command: list[str]
) -> None:
    hive = a_hive(tmp_path)
    MAKERS[kind](hive.config_file)

    run = hivemind(*command, hive=hive)
    out = finish(run, f"hivemind {command[0]} with hive.toml as {kind}")

    assert "Traceback" not in out
    lines = [line for line in out.splitlines() if "hive.toml" in line]
    assert len(lines) == 1, out
    assert f"{hive.config_file}: " in lines[0] and PROBLEMS[kind] in lines[0]
    if command[0] != "status":  # status shows it among the rest
        assert run.returncode == 1, out
        assert lines[0].startswith("error: ")


def test_a_hive_toml_linked_inside_the_hive_is_read(tmp_path: Path) -> None:
    hive = a_hive(tmp_path)
    _link_in(hive.config_file)

    out = finish(hivemind("run", "--until-idle", hive=hive), "run")

    assert "OFFLINE PROVIDER" in out and "Traceback" not in out
    assert (hive.done_dir / "t1.md").exists()


# -- hive.toml edited while the daemon runs ---------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link", "over-256-KB"])
def test_a_hive_toml_made_hostile_while_running_neither_hangs_nor_blocks_a_stop(
    tmp_path: Path, kind: str
) -> None:
    hive = Hive(tmp_path / "hive").ensure()
    write_agent(hive, "worker")
    hive.config_file.write_text(OFFLINE_TOML)
    run = hivemind("run", hive=hive)
    deadline = time.monotonic() + WAIT
    while not hive.status_file.exists():
        assert run.poll() is None and time.monotonic() < deadline, finish(run, "start")
        time.sleep(0.05)

    spare = hive.root / "spare.toml"
    MAKERS[kind](spare)
    os.replace(spare, hive.config_file)
    time.sleep(1.0)  # ten rescans
    run.send_signal(signal.SIGINT)
    out = finish(run, f"a stop after hive.toml became {kind}")

    told = [line for line in out.splitlines() if "hive.toml changed" in line]
    assert len(told) == 1, out  # once, though it was looked at ten times
    assert PROBLEMS[kind] in told[0]
    assert "this daemon keeps the settings it started with" in told[0]
    assert "Traceback" not in out


# -- ROM.md -------------------------------------------------------------------------------------


ROM_PROBLEMS = {**PROBLEMS, "over-256-KB": "file is 300,018 bytes; the limit is 262,144 (256 KB)"}
ROM_KINDS = ["fifo", "dev-zero-link", "link-out-of-the-hive", "hard-link-out", "over-256-KB"]


@pytest.mark.parametrize("kind", ROM_KINDS)
def test_a_hostile_rom_keeps_the_last_good_config(hive: Hive, kind: str) -> None:
    rom = write_agent(hive, "worker", front="model: claude-haiku-5-5\n")
    roms = RomRegistry(hive, AgentSettings())
    assert roms.load("worker").model == "claude-haiku-5-5"
    rom.unlink()
    MAKERS[kind](rom)

    config = roms.load("worker")

    assert config.model == "claude-haiku-5-5"  # the last good one
    assert roms.error("worker") == f"agents/worker/ROM.md: {ROM_PROBLEMS[kind]}"


@pytest.mark.parametrize("kind", ROM_KINDS)
def test_status_shows_a_hostile_rom_as_its_agent_s_problem(hive: Hive, kind: str) -> None:
    hive.agent_dir("worker").mkdir()
    MAKERS[kind](hive.rom_path("worker"))

    status = hive_status(hive)

    [agent] = status.agents
    assert agent.name == "worker" and not agent.ok
    assert agent.error == f"agents/worker/ROM.md: {ROM_PROBLEMS[kind]}"


def test_a_scratch_run_leaves_out_a_fifo_it_cannot_copy(tmp_path: Path) -> None:
    """`run --scratch` stopped with a shutil.Error traceback on a FIFO ROM.md."""
    hive = a_hive(tmp_path)
    hive.config_file.write_text(OFFLINE_TOML)
    hive.agent_dir("bad").mkdir()
    os.mkfifo(hive.rom_path("bad"))

    out = finish(hivemind("run", "--until-idle", "--scratch", hive=hive), "run --scratch")

    assert "Traceback" not in out and "stopped: idle" in out, out
    assert (hive.state_dir / "scratch" / "tasks" / "done" / "t1.md").exists()
    assert not (hive.done_dir / "t1.md").exists()  # your files untouched


def test_a_last_good_rom_linked_out_of_the_hive_is_not_taken(hive: Hive) -> None:
    """A cloned .hivemind/roms/ could hold a link to a file of the user's, to be sent
    to the model as the agent's instructions."""
    write_agent(hive, "worker", front="max_steps: 0\n")  # invalid: the last good one is looked up
    outside = hive.root.parent / "secret.md"
    outside.write_text("---\nrole: stolen\n---\nthe user's secret\n")
    saved = hive.last_good_rom_path("worker")
    saved.parent.mkdir(parents=True)
    saved.symlink_to(outside)

    with pytest.raises(ConfigError, match="max_steps"):
        RomRegistry(hive, AgentSettings()).load("worker")


def test_a_fifo_as_the_saved_last_good_rom_does_not_hang_the_daemon(hive: Hive) -> None:
    write_agent(hive, "worker", front="model: claude-haiku-5-5\n")
    saved = hive.last_good_rom_path("worker")
    saved.parent.mkdir(parents=True)
    os.mkfifo(saved)
    roms = RomRegistry(hive, AgentSettings())
    roms.saves_last_good = True  # as the daemon's
    loaded: list[str | None] = []
    reader = threading.Thread(target=lambda: loaded.append(roms.load("worker").model),
                              daemon=True)

    reader.start()
    reader.join(WAIT)

    assert loaded == ["claude-haiku-5-5"], "the ROM load hung on the FIFO"
    assert saved.is_file() and "claude-haiku-5-5" in saved.read_text()  # replaced


def test_a_folder_swapped_for_a_link_while_a_rom_is_read_is_not_followed(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ROM.md links to workspace/d/rom.md (inside: followed). Swapped for a link out
    between resolving the path and opening it, `workspace/d` led the read outside."""
    from hivemind.fs import regular

    folder = hive.workspace_dir / "d"
    folder.mkdir()
    (folder / "rom.md").write_text("---\nrole: shared\n---\nA ROM kept in the workspace.\n")
    outside = hive.root.parent / "outside"
    outside.mkdir()
    (outside / "rom.md").write_text("---\nrole: stolen\n---\nTHE USER'S SECRET\n")
    hive.agent_dir("worker").mkdir()
    hive.rom_path("worker").symlink_to("../../workspace/d/rom.md")
    roms = RomRegistry(hive, AgentSettings())
    assert roms.load("worker").role == "shared"

    resolve = os.path.realpath

    def resolve_then_swap(path: str | os.PathLike[str]) -> str:
        real = resolve(path)
        if real.endswith("rom.md") and not folder.is_symlink():  # the attacker's moment
            folder.rename(hive.workspace_dir / "d-old")
            folder.symlink_to(outside)
        return real

    monkeypatch.setattr(regular.os.path, "realpath", resolve_then_swap)
    os.utime(hive.rom_path("worker"), (1, 1))  # changed: read again

    config = roms.load("worker")

    assert config.role == "shared" and "SECRET" not in config.instructions
    assert roms.error("worker") == (
        "agents/worker/ROM.md: is a link that changed while read; not followed")
