"""ContentLoader: lazy, cached reads; line ranges; problems become visible notes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from hivemind.memory.blocks import FileRef
from hivemind.memory.loader import ContentLoader
from hivemind.memory.tokens import TokenCounter

TEN_LINES = "".join(f"line {i}\n" for i in range(1, 11))


@pytest.fixture
def loader(tmp_path: Path) -> ContentLoader:
    (tmp_path / "ten.txt").write_text(TEN_LINES)
    return ContentLoader(tmp_path, TokenCounter())


def touch_changed(path: Path, text: str) -> None:
    """Rewrite `path` so that both its size and its mtime change."""
    st = path.stat()
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


async def test_loads_a_whole_file_relative_to_the_root(loader: ContentLoader) -> None:
    got = await loader.load(FileRef(path="ten.txt"))
    assert got.text == TEN_LINES
    assert got.note is None
    assert got.tokens == loader.counter.count_json(TEN_LINES)
    assert got.digest == TokenCounter.digest(TEN_LINES)


async def test_loads_an_absolute_path(loader: ContentLoader, tmp_path: Path) -> None:
    got = await loader.load(FileRef(path=str(tmp_path / "ten.txt")))
    assert got.text == TEN_LINES


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        pytest.param(1, 1, "line 1\n", id="first-line"),
        pytest.param(3, 5, "line 3\nline 4\nline 5\n", id="inclusive-range"),
        pytest.param(10, 10, "line 10\n", id="last-line"),
        pytest.param(9, 50, "line 9\nline 10\n", id="end-past-eof-clamps"),
    ],
)
async def test_a_line_range_is_one_based_and_inclusive(
    loader: ContentLoader, start: int, end: int, expected: str
) -> None:
    got = await loader.load(FileRef(path="ten.txt", start_line=start, end_line=end))
    assert got.text == expected
    assert got.note is None


async def test_a_range_starting_past_the_end_is_a_range_note(loader: ContentLoader) -> None:
    got = await loader.load(FileRef(path="ten.txt", start_line=11, end_line=20))
    assert got.note == "range"
    assert "11-20" in got.text and "10 lines" in got.text


async def test_a_missing_file_is_a_note_not_an_exception(loader: ContentLoader) -> None:
    got = await loader.load(FileRef(path="workspace/nope.py"))
    assert got.note == "missing"
    assert got.text == "[file not found: workspace/nope.py]"
    assert got.tokens > 0


async def test_a_binary_file_is_a_note(loader: ContentLoader, tmp_path: Path) -> None:
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    got = await loader.load(FileRef(path="logo.png"))
    assert got.note == "binary"
    assert got.text.startswith("[binary file: logo.png")


async def test_an_empty_file_is_a_note(loader: ContentLoader, tmp_path: Path) -> None:
    (tmp_path / "empty.md").write_text("")
    got = await loader.load(FileRef(path="empty.md"))
    assert got.note == "empty"
    assert "empty.md" in got.text


async def test_a_directory_is_an_unreadable_note(loader: ContentLoader, tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    got = await loader.load(FileRef(path="adir"))
    assert got.note == "unreadable"


async def test_a_few_undecodable_bytes_do_not_make_a_file_binary(
    loader: ContentLoader, tmp_path: Path
) -> None:
    (tmp_path / "latin.txt").write_bytes(b"caf\xe9 au lait, " * 50 + b"plain text " * 500)
    got = await loader.load(FileRef(path="latin.txt"))
    assert got.note is None
    assert "plain text" in got.text


async def test_a_short_latin1_note_is_text_read_as_cp1252(
    loader: ContentLoader, tmp_path: Path
) -> None:
    (tmp_path / "latin1.md").write_bytes("# Café notes\nrésumé of café\n".encode("latin-1"))
    got = await loader.load(FileRef(path="latin1.md"))
    assert got.note is None
    assert got.text == "# Café notes\nrésumé of café\n"
    assert got.encoding == "cp1252"
    line = await loader.load(FileRef(path="latin1.md", start_line=2, end_line=2))
    assert (line.text, line.encoding) == ("résumé of café\n", "cp1252")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(bytes(range(1, 256)) * 20, id="every-byte-but-nul"),
        pytest.param(b"\x01\x02\x03\x04\xe9\xff\x7f\x10" * 4, id="short-controls"),
    ],
)
async def test_bytes_without_nul_or_utf8_are_binary_when_control_bytes_say_so(
    loader: ContentLoader, tmp_path: Path, data: bytes
) -> None:
    (tmp_path / "blob.md").write_bytes(data)
    got = await loader.load(FileRef(path="blob.md"))
    assert got.note == "binary"


async def test_utf8_with_a_stray_byte_stays_utf8(loader: ContentLoader, tmp_path: Path) -> None:
    (tmp_path / "mixed.md").write_bytes("naïve café ".encode() + b"\xe9 end\n")
    got = await loader.load(FileRef(path="mixed.md"))
    assert got.note is None and got.encoding is None
    assert got.text == "naïve café \ufffd end\n"


async def test_an_unchanged_file_costs_no_read_and_no_tokenisation(
    loader: ContentLoader,
) -> None:
    ref = FileRef(path="ten.txt", start_line=2, end_line=4)
    first = await loader.load(ref)
    read, tokenised = loader.bytes_read, loader.counter.tokenised
    again = await loader.load(ref)
    assert again == first
    assert loader.bytes_read == read
    assert loader.counter.tokenised == tokenised


async def test_a_changed_file_is_read_again(loader: ContentLoader, tmp_path: Path) -> None:
    ref = FileRef(path="ten.txt")
    await loader.load(ref)
    touch_changed(tmp_path / "ten.txt", "a new first line\n")
    got = await loader.load(ref)
    assert got.text == "a new first line\n"
    assert loader.files_read == 2


async def test_concurrent_loads_of_one_file_read_it_once(loader: ContentLoader) -> None:
    refs = [FileRef(path="ten.txt")] + [
        FileRef(path="ten.txt", start_line=i, end_line=i) for i in range(1, 11)
    ]
    got = await asyncio.gather(*(loader.load(r) for r in refs))
    assert [g.text for g in got[1:]] == TEN_LINES.splitlines(keepends=True)
    assert loader.files_read == 1


async def test_invalidate_forces_a_read(loader: ContentLoader) -> None:
    await loader.load(FileRef(path="ten.txt"))
    loader.invalidate("ten.txt")
    await loader.load(FileRef(path="ten.txt"))
    assert loader.files_read == 2


async def test_the_cache_stays_within_its_byte_budget(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n" * 200)
    loader = ContentLoader(tmp_path, TokenCounter(), max_cache_bytes=8_000)
    for i in range(20):
        await loader.load(FileRef(path=f"f{i}.txt"))
    assert 0 < loader.cached_bytes <= 8_000
    await loader.load(FileRef(path="f0.txt"))  # evicted long ago
    assert loader.files_read == 21


def test_estimate_before_reading_comes_from_the_size(loader: ContentLoader, tmp_path: Path) -> None:
    size = (tmp_path / "ten.txt").stat().st_size
    assert loader.estimate(FileRef(path="ten.txt")) == loader.counter.estimate_bytes(size)
    assert loader.bytes_read == 0


async def test_estimate_after_reading_is_exact(loader: ContentLoader) -> None:
    ref = FileRef(path="ten.txt", start_line=1, end_line=3)
    got = await loader.load(ref)
    assert loader.estimate(ref) == got.tokens
    whole = await loader.load(FileRef(path="ten.txt"))
    assert loader.estimate(FileRef(path="ten.txt")) == whole.tokens


async def test_estimate_follows_a_change_of_size(loader: ContentLoader, tmp_path: Path) -> None:
    await loader.load(FileRef(path="ten.txt"))
    touch_changed(tmp_path / "ten.txt", "x" * 3000)
    assert loader.estimate(FileRef(path="ten.txt")) == loader.counter.estimate_bytes(3000)


def test_a_data_file_is_estimated_at_the_dense_rate(
    loader: ContentLoader, tmp_path: Path
) -> None:
    (tmp_path / "data.json").write_text('{"a": 1}' * 300)
    dense = loader.counter.estimate_bytes(2400, dense=True)
    assert loader.estimate(FileRef(path="data.json")) == dense


def test_estimate_of_a_missing_file_is_small(loader: ContentLoader) -> None:
    assert 0 < loader.estimate(FileRef(path="ghost.md")) < 50


async def test_load_small_reads_small_files_in_place_and_leaves_the_rest_to_load(
    loader: ContentLoader, tmp_path: Path
) -> None:
    from hivemind.memory.loader import INLINE_READ_BYTES

    (tmp_path / "small.md").write_text("line 1\nline 2\nline 3\n")
    (tmp_path / "big.md").write_text("x" * (INLINE_READ_BYTES + 1))
    small = loader.load_small("small.md")
    assert small is not None and small.text == "line 1\nline 2\nline 3\n"
    assert await loader.load(FileRef(path="small.md")) is small  # the cached object
    part = loader.load_small("small.md", 2, 3)
    assert part is not None and part.text == "line 2\nline 3\n"
    assert loader.load_small("big.md") is None  # read in a thread by load
    assert loader.load_small("missing.md") is None
    big = await loader.load(FileRef(path="big.md"))
    assert big.text == "x" * (INLINE_READ_BYTES + 1)
    assert loader.bytes_read == len("line 1\nline 2\nline 3\n") + INLINE_READ_BYTES + 1
