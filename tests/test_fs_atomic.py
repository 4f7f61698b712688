"""fs/atomic.py and fs/noreplace.py at the edges: the longest file names, special mode bits."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hivemind.fs.atomic import KEEP_MODE, atomic_write
from hivemind.fs.noreplace import move_unique


@pytest.mark.parametrize(
    ("name", "second"),
    [
        ("m" * 252 + ".md", "m" * 250 + "-1.md"),
        ("m" * 245 + ".markdown1", "m" * 243 + "-1.markdown1"),
        ("m.x" + "y" * 252, "m.x" + "y" * 250 + "-1"),  # a long extension is cut too
        ("a" + "\u00e9" * 125 + ".md", "a" + "\u00e9" * 124 + "-1.md"),  # whole characters
    ],
    ids=["ascii", "ten-character-extension", "long-extension", "two-byte-characters"],
)
def test_move_unique_cuts_a_taken_longest_name_to_fit(
    tmp_path: Path, name: str, second: str
) -> None:
    """`-1` on a 255-byte name is past what a file name holds: the move raised."""
    (tmp_path / name).write_text("taken")
    src = tmp_path / "in" / name
    src.parent.mkdir()
    src.write_text("mine")

    moved = move_unique(src, tmp_path)

    assert moved.name == second and len(os.fsencode(moved.name)) <= 255
    assert moved.read_text() == "mine" and (tmp_path / name).read_text() == "taken"


@pytest.mark.parametrize(
    ("before", "after"),
    [(0o4755, 0o755), (0o2750, 0o750), (0o1644, 0o644)],
    ids=["setuid", "setgid", "sticky"],
)
@pytest.mark.parametrize("mode", [KEEP_MODE, "given"])
def test_a_rewrite_keeps_the_permission_bits_but_not_setuid_setgid_or_sticky(
    tmp_path: Path, before: int, after: int, mode: str
) -> None:
    """Such bits are cleared by an ordinary write (for all but root): a rewrite must not
    keep them. Given: the caller stat'ed the file and passes its mode (write_file)."""
    path = tmp_path / "tool"
    path.write_text("old")
    path.chmod(before)

    atomic_write(path, "new", mode=stat.S_IMODE(path.stat().st_mode) if mode == "given" else mode)

    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == after
