"""write_file replaces a regular file whole, keeping its permission bits, and refuses
anything else at the path (a FIFO or socket here; a device node alike) without blocking."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hivemind.fs.atomic import atomic_write
from hivemind.hive.layout import Hive
from tests.test_tools import call, make_ctx


def default_mode() -> int:
    """The mode a new file gets: 0o644 less the process's umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o644 & ~mask


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.fixture
def make_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], None]]:
    """Binds a Unix socket at a path (by a relative name: a socket path is short)."""
    opened: list[socket.socket] = []

    def bind(path: Path) -> None:
        monkeypatch.chdir(path.parent)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        opened.append(sock)
        sock.bind(path.name)

    yield bind
    for sock in opened:
        sock.close()


@pytest.fixture(params=["fifo", "socket"])
def special(request: pytest.FixtureRequest, make_socket: Callable[[Path], None]) -> tuple[
    str, Callable[[Path], None], Callable[[int], bool]
]:
    """A kind of file that is not a regular file: its name, a maker, and its test."""
    kinds: dict[str, tuple[Callable[[Path], None], Callable[[int], bool]]] = {
        "fifo": (make_fifo, stat.S_ISFIFO),
        "socket": (make_socket, stat.S_ISSOCK),
    }
    make, is_kind = kinds[request.param]
    return request.param, make, is_kind


async def test_a_write_onto_a_special_file_is_refused_and_leaves_it(
    hive: Hive, special: tuple[str, Callable[[Path], None], Callable[[int], bool]]
) -> None:
    name, make, is_kind = special
    make(hive.workspace_dir / name)
    ctx = make_ctx(hive)

    content, is_error = await asyncio.wait_for(
        call(ctx, "write_file", path=f"workspace/{name}", content="text"), 5
    )

    assert (content, is_error) == (f"workspace/{name} is not a regular file", True)
    assert is_kind(os.lstat(hive.workspace_dir / name).st_mode)
    assert ctx.effects.files_written == []


@pytest.mark.parametrize("mode", [0o755, 0o600, 0o444], ids=["executable", "private", "read-only"])
async def test_a_replaced_file_keeps_its_permission_bits(hive: Hive, mode: int) -> None:
    path = hive.workspace_dir / "run.sh"
    path.write_text("echo old\n")
    path.chmod(mode)
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "write_file", path="workspace/run.sh",
                                   content="echo new\n")

    assert (content, is_error) == ("wrote workspace/run.sh (9 bytes)", False)
    assert path.read_text() == "echo new\n"
    assert stat.S_IMODE(path.stat().st_mode) == mode


async def test_a_new_file_gets_the_default_mode(hive: Hive) -> None:
    ctx = make_ctx(hive)

    _, is_error = await call(ctx, "write_file", path="workspace/new/notes.md", content="x")

    assert not is_error
    assert stat.S_IMODE((hive.workspace_dir / "new" / "notes.md").stat().st_mode) == (
        default_mode()
    )


def test_an_atomic_write_keeps_the_mode_of_the_file_it_replaces(tmp_path: Path) -> None:
    kept, fresh = tmp_path / "tool.py", tmp_path / "fresh.md"
    kept.write_text("old")
    kept.chmod(0o750)

    atomic_write(kept, "new")
    atomic_write(fresh, "new", fsync=False)

    assert kept.read_text() == "new"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o750
    assert stat.S_IMODE(fresh.stat().st_mode) == default_mode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.md", "tool.py"]
