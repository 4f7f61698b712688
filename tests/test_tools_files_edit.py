"""edit_file changes one exact text in a UTF-8 file within the write limit, and leaves
any other file exactly as it was."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from pathlib import Path

import pytest

from hivemind.hive.layout import Hive
from hivemind.tools import files
from hivemind.tools.files import MAX_WRITE_BYTES
from tests.test_tools import call, make_ctx


async def test_a_file_that_is_not_utf8_is_refused_and_left_unchanged(hive: Hive) -> None:
    path = hive.workspace_dir / "latin1.txt"
    path.write_bytes(b"caf\xe9 ok\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "edit_file", path="workspace/latin1.txt",
                                   old="ok", new="fine")

    assert is_error
    assert content == (
        "workspace/latin1.txt is not valid UTF-8 (byte 3); edit_file would damage it; "
        "write_file replaces a whole file"
    )
    assert path.read_bytes() == b"caf\xe9 ok\n"
    assert ctx.effects.files_written == []


async def test_an_edit_that_would_pass_the_write_limit_is_refused(hive: Hive) -> None:
    path = hive.workspace_dir / "notes.md"
    path.write_text("keep\nswap\n")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "edit_file", path="workspace/notes.md",
                                   old="swap", new="y" * 3_000_000)

    assert is_error
    assert content == f"the edited file would be 3000006 bytes; the limit is {MAX_WRITE_BYTES}"
    assert path.read_text() == "keep\nswap\n"


async def test_a_file_over_the_write_limit_is_not_read_for_an_edit(hive: Hive) -> None:
    path = hive.workspace_dir / "big.md"
    path.write_text("needle\n" + "x" * MAX_WRITE_BYTES)
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "edit_file", path="workspace/big.md",
                                   old="needle", new="pin")

    assert is_error
    assert content == (
        f"workspace/big.md is over {MAX_WRITE_BYTES} bytes, the most edit_file edits; "
        "write_file replaces a whole file"
    )
    assert path.read_text().startswith("needle\n")


async def test_an_edit_keeps_every_other_byte(hive: Hive) -> None:
    path = hive.workspace_dir / "dos.txt"
    path.write_bytes("naïve\r\nold\r\n".encode())
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "edit_file", path="workspace/dos.txt",
                                   old="old", new="new")

    assert (content, is_error) == ("edited workspace/dos.txt", False)
    assert path.read_bytes() == "naïve\r\nnew\r\n".encode()


@pytest.mark.parametrize("mode", [0o755, 0o600], ids=["executable", "private"])
async def test_an_edit_keeps_the_permission_bits(hive: Hive, mode: int) -> None:
    path = hive.workspace_dir / "run.sh"
    path.write_text("echo old\n")
    path.chmod(mode)
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "edit_file", path="workspace/run.sh",
                                   old="old", new="new")

    assert (content, is_error) == ("edited workspace/run.sh", False)
    assert path.read_text() == "echo new\n"
    assert stat.S_IMODE(path.stat().st_mode) == mode


async def test_an_edit_of_a_fifo_is_refused_and_leaves_it(hive: Hive) -> None:
    os.mkfifo(hive.workspace_dir / "pipe")
    ctx = make_ctx(hive)

    content, is_error = await asyncio.wait_for(
        call(ctx, "edit_file", path="workspace/pipe", old="a", new="b"), 5
    )

    assert (content, is_error) == ("workspace/pipe is not a regular file", True)
    assert stat.S_ISFIFO(os.lstat(hive.workspace_dir / "pipe").st_mode)
    assert ctx.effects.files_written == []


async def test_a_fifo_put_in_the_files_place_mid_edit_is_refused_without_blocking(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = hive.workspace_dir / "notes.md"
    path.write_text("old\n")
    checked = files._replaced_mode

    def then_swapped(target: Path, shown: str) -> int | None:
        mode = checked(target, shown)
        target.unlink()
        os.mkfifo(target)  # another process, between the check and the open
        return mode

    monkeypatch.setattr(files, "_replaced_mode", then_swapped)
    ctx = make_ctx(hive)
    try:
        content, is_error = await asyncio.wait_for(
            call(ctx, "edit_file", path="workspace/notes.md", old="old", new="new"), 5
        )
    finally:
        # A reader blocked on the FIFO (the bug) is let go, so the run can end.
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    assert (content, is_error) == ("workspace/notes.md is not a regular file", True)
    assert stat.S_ISFIFO(os.lstat(path).st_mode)
