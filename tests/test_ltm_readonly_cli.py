"""`hivemind memory ...` on a hive its user cannot write: reading works, writing says why.

Permissions do not stop root, so when the tests run as root each command runs as an
unprivileged owner of the hive (a forked child that gives up root first): the mode
bits then mean for it what they mean for any user.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.ltm.schema import SCHEMA_VERSION
from hivemind.ltm.store import LongTermMemory
from tests.helpers import write_agent
from tests.test_ltm_sqlite import old_database

runner = CliRunner()
AS_ROOT = os.geteuid() == 0
OWNER = 65534  # who owns the hive when the tests run as root ("nobody")
LINE = {"id": "m1", "content": "Greyhounds sleep most of the day"}
NEW_LINE = {"id": "m2", "content": "Whippets are smaller than greyhounds"}


def invoke(*args: str) -> tuple[int, str, str]:
    """`hivemind ARGS` as this user: (exit code, stdout, stderr)."""
    result = runner.invoke(app, list(args))
    text = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        text += "".join(traceback.format_exception(result.exception))
    return result.exit_code, result.stdout, text


def invoke_as_owner(*args: str) -> tuple[int, str, str]:
    """`hivemind ARGS` as the hive's owner: this user, or (as root) `OWNER`."""
    if not AS_ROOT:
        return invoke(*args)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        payload: tuple[int, str, str] = (99, "", "the child failed before running")
        try:
            os.close(reader)
            os.setgroups([])
            os.setgid(OWNER)
            os.setuid(OWNER)
            payload = invoke(*args)
        except BaseException:
            payload = (99, "", traceback.format_exc())
        finally:
            with os.fdopen(writer, "w") as out:
                out.write(json.dumps(payload))
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as result:
        code, out, err = json.loads(result.read())
    os.waitpid(pid, 0)
    return int(code), str(out), str(err)


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    """A folder for the hive; as root, one the owner can reach (tmp_path's parents are
    root's own), removed afterwards. Write permission is given back before removal."""
    folder = tmp_path
    if AS_ROOT:
        folder = Path(tempfile.mkdtemp(prefix="hivemind-readonly-"))
        folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    if AS_ROOT:
        shutil.rmtree(folder)


def owned(root: Path) -> None:
    """Everything under `root` belongs to the owner of the hive."""
    if AS_ROOT:
        for path in [root, *root.rglob("*")]:
            os.chown(path, OWNER, OWNER)


def jsonl(folder: Path, *lines: dict[str, str]) -> Path:
    path = folder / f"in-{len(list(folder.glob('in-*')))}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    path.chmod(0o644)
    return path


@pytest.fixture
def stored(base: Path) -> tuple[Hive, str]:
    """A hive with one memory and one proposed preference; returns it and the proposal's id."""
    hive = Hive(base / "hive").ensure()
    where = ("--hive", str(hive.root))
    assert invoke("memory", "import", str(jsonl(base, LINE)), *where)[0] == 0
    with LongTermMemory(hive) as ltm:  # an agent's proposal
        proposal = ltm.remember("Reply in British English", agent="ann", scope="global",
                                preference=True).id
    code, out_search, _ = invoke("memory", "search", "greyhounds", *where)
    assert code == 0 and "m1" in out_search
    owned(hive.root)
    return hive, proposal


def read_only_file(hive: Hive) -> None:
    hive.memory_db.chmod(0o444)


def read_only_folder(hive: Hive) -> None:
    hive.memory_db.parent.chmod(0o555)


def read_only_both(hive: Hive) -> None:
    read_only_file(hive)
    read_only_folder(hive)


READ_ONLY = [
    pytest.param(read_only_file, "the file is read-only", id="store-file"),
    pytest.param(read_only_folder, "its folder is read-only", id="store-folder"),
    pytest.param(read_only_both, "the file is read-only", id="file-and-folder"),
]


def exported(hive: Hive) -> list[dict[str, object]]:
    code, out, err = invoke_as_owner("memory", "export", "--hive", str(hive.root))
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.parametrize(("make_read_only", "_problem"), READ_ONLY)
def test_reading_commands_work_on_a_read_only_store(
    stored: tuple[Hive, str], make_read_only: Callable[[Hive], None], _problem: str
) -> None:
    hive, _ = stored
    make_read_only(hive)
    where = ("--hive", str(hive.root))

    code, out, err = invoke_as_owner("memory", "search", "greyhounds", "--json", *where)
    assert (code, err) == (0, "")
    assert [m["id"] for m in json.loads(out)] == ["m1"]
    code, out, err = invoke_as_owner("memory", "stats", "--json", *where)
    assert (code, err) == (0, "")
    assert json.loads(out)["total"] == 2
    assert {m["id"] for m in exported(hive)} == {"m1", stored[1]}


@pytest.mark.parametrize(("make_read_only", "problem"), READ_ONLY)
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["add", "Lurchers are greyhound crosses"], id="add"),
        pytest.param(["import", "NEW"], id="import"),
        pytest.param(["approve", "PROPOSAL"], id="approve"),
        pytest.param(["forget", "m1"], id="forget"),
    ],
)
def test_writing_commands_on_a_read_only_store_fail_with_one_line_naming_it(
    stored: tuple[Hive, str],
    make_read_only: Callable[[Hive], None],
    problem: str,
    command: list[str],
) -> None:
    hive, proposal = stored
    args = [
        str(jsonl(hive.root.parent, NEW_LINE)) if a == "NEW" else proposal
        if a == "PROPOSAL" else a
        for a in command
    ]  # fmt: skip
    before = exported(hive)
    make_read_only(hive)

    code, out, err = invoke_as_owner("memory", *args, "--hive", str(hive.root))

    assert code == 1, err
    assert out == ""
    assert err.startswith(f"error: {hive.memory_db}: cannot write the memory store: {problem}")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "search`, `export` and `stats` can still read it" in err
    assert exported(hive) == before


@pytest.fixture
def storeless(base: Path) -> Hive:
    """A hive its owner cannot write that has no memory store (nor a .hivemind folder)."""
    hive = Hive(base / "hive")
    hive.tasks_dir.mkdir(parents=True)
    owned(hive.root)
    hive.root.chmod(0o555)
    return hive


@pytest.mark.parametrize(
    ("command", "nothing"),
    [
        pytest.param(["search", "anything", "--json"], [], id="search"),
        pytest.param(["export"], None, id="export"),
        pytest.param(["stats", "--json"], 0, id="stats"),
    ],
)
def test_reading_a_read_only_hive_without_a_store_finds_nothing_and_makes_nothing(
    storeless: Hive, command: list[str], nothing: object
) -> None:
    code, out, err = invoke_as_owner("memory", *command, "--hive", str(storeless.root))
    assert (code, err) == (0, "")
    if command[0] == "stats":
        assert json.loads(out)["total"] == nothing
    else:
        assert (json.loads(out) if out else None) == nothing
    assert not storeless.memory_db.parent.exists()


def test_adding_to_a_read_only_hive_without_a_store_names_the_folder(storeless: Hive) -> None:
    code, _, err = invoke_as_owner("memory", "add", "x", "--hive", str(storeless.root))
    assert code == 1, err
    assert err.strip() == (f"error: {storeless.memory_db}: cannot create the memory store: "
                           f"the folder {storeless.root} is read-only")  # fmt: skip


# Reproductions that stop root as well: something in the store's place.


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param(["add", "x"], "cannot write the memory store", id="add"),
        pytest.param(["search", "x"], "cannot read the memory store", id="search"),
        pytest.param(["stats"], "cannot read the memory store", id="stats"),
    ],
)
def test_a_folder_in_the_store_s_place_is_one_line(
    hive: Hive, command: list[str], expected: str
) -> None:
    hive.memory_db.mkdir(parents=True)
    code, out, err = invoke("memory", *command, "--hive", str(hive.root))
    assert code == 1
    assert err.strip() == f"error: {hive.memory_db}: {expected}: this is a folder, not a database"
    assert out == ""


def test_a_file_in_the_store_folder_s_place_is_one_line(tmp_path: Path) -> None:
    hive = Hive(tmp_path / "hive")
    hive.tasks_dir.mkdir(parents=True)
    hive.memory_db.parent.write_text("not a folder")
    code, _, err = invoke("memory", "add", "x", "--hive", str(hive.root))
    assert code == 1
    assert err.strip() == (f"error: {hive.memory_db}: cannot create the memory store: "
                           f"{hive.memory_db.parent} is a file, not a folder")  # fmt: skip


@pytest.mark.parametrize(
    "command", [["search", "anything"], ["export"], ["stats"]], ids=["search", "export", "stats"]
)
def test_reading_commands_make_no_store_and_leave_one_as_it_was(
    hive: Hive, tmp_path: Path, command: list[str]
) -> None:
    where = ("--hive", str(hive.root))
    assert invoke("memory", *command, *where)[0] == 0
    assert not hive.memory_db.exists()  # none made for a look

    assert invoke("memory", "import", str(jsonl(tmp_path, LINE)), *where)[0] == 0
    files = sorted(p.name for p in hive.memory_db.parent.iterdir())
    data = hive.memory_db.read_bytes()
    mode = stat.S_IMODE(hive.memory_db.stat().st_mode)
    assert invoke("memory", *command, *where)[0] == 0
    # No -wal or -shm file left behind, not a byte written.
    assert sorted(p.name for p in hive.memory_db.parent.iterdir()) == files
    assert hive.memory_db.read_bytes() == data
    assert stat.S_IMODE(hive.memory_db.stat().st_mode) == mode


# A store an older hivemind left: a look neither upgrades it nor fails on it.


def md5_and_version(db: Path) -> tuple[str, int]:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    conn.close()
    return hashlib.md5(db.read_bytes()).hexdigest(), version


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION), ids=lambda v: f"v{v}")
@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["memory", "stats", "--json"], id="memory-stats"),
        pytest.param(["memory", "search", "cache", "--json"], id="memory-search"),
        pytest.param(["memory", "export"], id="memory-export"),
        pytest.param(["inspect", "worker", "--json"], id="inspect"),
    ],
)
def test_a_look_at_an_older_store_reads_it_and_changes_nothing(
    hive: Hive, version: int, command: list[str]
) -> None:
    """`memory stats` and `inspect` upgraded a v2 store to v3 (its md5 changed too)."""
    write_agent(hive, "worker")
    old_database(hive.memory_db, version)
    files = sorted(p.name for p in hive.memory_db.parent.iterdir())
    before = md5_and_version(hive.memory_db)

    code, out, err = invoke(*command, "--hive", str(hive.root))

    assert (code, err) == (0, "")
    assert md5_and_version(hive.memory_db) == before == (before[0], version)
    assert sorted(p.name for p in hive.memory_db.parent.iterdir()) == files
    if command[:2] == ["memory", "stats"]:
        assert json.loads(out)["total"] == 1
    elif command[0] == "memory":
        assert "old-1" in out


def test_an_older_store_its_user_cannot_write_is_read(base: Path) -> None:
    """It was refused: "needs an upgrade, and the store cannot be written"."""
    hive = Hive(base / "hive").ensure()
    old_database(hive.memory_db, SCHEMA_VERSION - 1)
    owned(hive.root)
    read_only_file(hive)

    code, out, err = invoke_as_owner("memory", "search", "cache", "--json",
                                     "--hive", str(hive.root))

    assert (code, err) == (0, "")
    assert [m["id"] for m in json.loads(out)] == ["old-1"]
