"""The stat cache: a file parsed once while it is unchanged, and never trusted by its
stat alone while it may still change under the same stat (read within RACY_MARGIN of
its mtime): then its text is compared, not parsed again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hivemind.errors import FileFormatError
from hivemind.fs.statcache import RACY_MARGIN, StatCache
from hivemind.hive.document import read_text
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.tasks.index import TaskIndex


class Parser:
    """A parse function that counts its calls: the value is the text, upper-cased."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, text: str, path: Path) -> str:
        self.calls.append(path.name)
        return text.upper()


def write_same_stat(path: Path, text: str) -> None:
    """Rewrite `path` with `text` (of the same length) and put its mtime back: a change
    the stat cannot show."""
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns


def age(path: Path, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(path, (when, when))


def test_an_old_file_is_trusted_by_its_stat(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("alpha")
    age(path, 10)
    cache: StatCache[str] = StatCache(read_text)
    parse = Parser()
    assert cache.load(path, path.stat(), parse) == "ALPHA"
    assert cache.load(path, path.stat(), parse) == "ALPHA"
    assert parse.calls == ["a.md"]


def test_a_fresh_file_is_compared_by_its_text_not_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("alpha")  # its mtime is now: read within the racy margin
    cache: StatCache[str] = StatCache(read_text)
    parse = Parser()
    first = cache.load(path, path.stat(), parse)
    again = cache.load(path, path.stat(), parse)
    assert again is first
    assert cache.get(path, path.stat()) is first
    assert parse.calls == ["a.md"]


def test_a_fresh_file_changed_under_the_same_stat_is_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("alpha")
    cache: StatCache[str] = StatCache(read_text)
    parse = Parser()
    assert cache.load(path, path.stat(), parse) == "ALPHA"
    write_same_stat(path, "omega")
    assert cache.get(path, path.stat()) is None
    assert cache.load(path, path.stat(), parse) == "OMEGA"
    assert parse.calls == ["a.md", "a.md"]


def test_once_checked_past_the_margin_the_stat_is_trusted_again(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_text("alpha")
    cache: StatCache[str] = StatCache(read_text)
    parse = Parser()
    cache.load(path, path.stat(), parse)
    time.sleep(RACY_MARGIN + 0.05)
    assert cache.load(path, path.stat(), parse) == "ALPHA"  # text compared, now old enough
    write_same_stat(path, "omega")  # a change the stat cannot show, long after: trusted
    assert cache.load(path, path.stat(), parse) == "ALPHA"
    assert parse.calls == ["a.md"]


def test_a_moved_fresh_file_keeps_its_value_only_if_its_text_is_the_same(
    tmp_path: Path,
) -> None:
    cache: StatCache[str] = StatCache(read_text)
    parse = Parser()
    old, new = tmp_path / "a.md", tmp_path / "b.md"
    old.write_text("alpha")
    first = cache.load(old, old.stat(), parse)
    os.rename(old, new)
    assert cache.moved(old, new, new.stat()) is first
    assert cache.load(new, new.stat(), parse) is first
    # Moved again, changed on the way under the same stat: not taken for the old value.
    other = tmp_path / "c.md"
    os.rename(new, other)
    write_same_stat(other, "omega")
    assert cache.moved(new, other, other.stat()) is None
    assert cache.load(other, other.stat(), parse) == "OMEGA"
    assert parse.calls == ["a.md", "c.md"]


def test_read_and_parse_errors_propagate_and_cache_nothing(tmp_path: Path) -> None:
    cache: StatCache[str] = StatCache(read_text)
    empty = tmp_path / "empty.md"
    empty.write_text("")
    with pytest.raises(FileFormatError, match="empty"):
        cache.load(empty, empty.stat(), Parser())

    def refuse(text: str, path: Path) -> str:
        raise FileFormatError(path, "no good", 1)

    bad = tmp_path / "bad.md"
    bad.write_text("text")
    with pytest.raises(FileFormatError, match="no good"):
        cache.load(bad, bad.stat(), refuse)
    assert len(cache) == 0


def test_a_burst_of_new_tasks_is_seen_again_without_a_new_parse(tmp_path: Path) -> None:
    """The board looks again at tasks read within the margin; unchanged, they keep their
    parsed task (the same object), changed under the same stat, they are read anew."""
    hive = Hive(tmp_path / "hive").ensure()
    for i in range(5):
        (hive.tasks_dir / f"t{i}.md").write_text(f"# Task {i}\n\nDo thing {i}.\n")
    pending = TaskIndex(hive, settle_time=0.0).pending
    first = {r.id: r.task for r in pending.scan()}
    assert pending.unsettled == 5  # all read within the margin: looked at again
    write_same_stat(hive.tasks_dir / "t3.md", "# Task 3\n\nDo thing X.\n")
    again = {r.id: r.task for r in pending.scan([])}
    assert sorted(again) == sorted(first)
    assert all(again[t] is first[t] for t in first if t != "t3")
    assert again["t3"] is not first["t3"]
    assert again["t3"].body.endswith("Do thing X.")


@pytest.mark.parametrize("content", ["---\nfrom: [unclosed\n---\nhello\n", ""])
def test_a_fresh_message_that_is_not_valid_keeps_its_id_across_looks(
    hive: Hive, content: str
) -> None:
    """A raw message (front matter that does not parse, or no text at all; a file name
    that is no id) keeps one id while the file is there, or the agent would see new
    mail at every look."""
    box = Mailbox(hive, "bob")
    box.new_dir.mkdir(parents=True, exist_ok=True)
    (box.new_dir / "back\\slash.md").write_text(content)
    ids = {item.message.id for _ in range(3) for item in box.unread()}
    assert len(ids) == 1
    (message_id,) = ids
    assert message_id.startswith("raw-")
