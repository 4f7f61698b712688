"""edit_file changes one exact text in a UTF-8 file within the write limit, and leaves
any other file exactly as it was."""

from __future__ import annotations

from hivemind.hive.layout import Hive
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
