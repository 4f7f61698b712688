"""The shared knowledge base (knowledge/**/*.md) as notes: location, topic, size.

Only a note's topic (its first `# heading`) is read here, and only when the
file changed; its text is read later by whoever needs it (perceive makes each
note a KNOWLEDGE block, loaded only if the selector keeps it).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from hivemind.fs.filenames import NOT_UTF8, is_utf8, shown
from hivemind.fs.globs import glob_match
from hivemind.fs.statcache import StatMemo
from hivemind.fs.treewalk import MAX_DEPTH
from hivemind.hive.layout import Hive, is_temp_name

logger = logging.getLogger(__name__)

_HEAD_BYTES = 4 * 1024
"""The topic heading is near the top: at most this much of a note is read for it (past
its front matter)."""
_FRONT_MATTER_BYTES = 64 * 1024
"""A front matter block is read up to this far for its end; past it, the topic is the
file's name."""
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FENCE_END = re.compile(rb"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)
_PREFIX = "knowledge/"


_UNRENAMED = f"{NOT_UTF8}; it is not read as knowledge until renamed"
_TOO_DEEP = (f"more than {MAX_DEPTH} folders deep: its folders are not read as knowledge "
             "(move them up)")


@dataclass(frozen=True)
class Note:
    """One knowledge file: hive-relative location, topic, size, mtime."""

    location: str
    topic: str
    size: int
    mtime: float


def _topic(path: Path) -> str:
    """The note's first heading, or its file name if none is near the top."""
    # O_NOFOLLOW: a note replaced by a link since the scan is not read through it.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb", buffering=0) as f:  # unbuffered: a read takes what it asks
        head = f.read(_HEAD_BYTES)
        if head.startswith(b"---"):
            end = _FENCE_END.search(head, 3)
            while end is None and len(head) < _FRONT_MATTER_BYTES:
                more = f.read(min(_HEAD_BYTES, _FRONT_MATTER_BYTES - len(head)))
                if not more:
                    break
                head += more
                end = _FENCE_END.search(head, 3)
            if end is None:
                return path.stem
            head = head[end.end() :] + f.read(max(0, _HEAD_BYTES - (len(head) - end.end())))
    match = _HEADING.search(head.decode("utf-8", errors="replace"))
    return match.group(1).strip() if match else path.stem


class KnowledgeIndex:
    """Topics of the notes under knowledge/, refreshed by stat (changed files only)."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self._topics: StatMemo[str, str] = StatMemo()  # by absolute path
        self._notes: dict[str, Note] = {}
        # Bumped when the notes change; what is derived from them is kept until then.
        self.version = 0
        self._selected: dict[tuple[str, ...] | None, tuple[int, list[Note]]] = {}
        self._told: set[str] = set()  # names that are not UTF-8, warned about once

    def refresh(self) -> bool:
        """Re-scan knowledge/; re-reads only changed files. True if anything changed."""
        notes: dict[str, Note] = {}
        self._scan(os.fspath(self.hive.knowledge_dir), _PREFIX.rstrip("/"), notes)
        changed = notes != self._notes
        self._notes = notes
        if changed:
            self.version += 1
        return changed

    def _scan(self, top: str, top_location: str, notes: dict[str, Note]) -> None:
        """Add the notes of `top` (hive-relative `top_location`) and of its sub-folders
        in path order, as `os.walk` would find them (links to folders not entered), to
        `MAX_DEPTH` levels: iterative, so no tree is too deep for it."""
        stack = [(top, top_location, 0)]
        while stack:
            folder, location, depth = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            folders = []
            for entry in entries:
                name = entry.name
                if not is_utf8(name):
                    self._skip_unreadable_name(f"{location}/{name}")
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if is_dir:
                    if not is_temp_name(name):
                        folders.append(name)
                    continue
                if is_temp_name(name) or not name.endswith(".md"):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                        continue  # a symlink or a hard link could be a file outside the hive
                    where = f"{location}/{name}"
                    notes[where] = self._note(where, entry.path, st)
                except OSError:
                    continue
            if folders and depth + 1 >= MAX_DEPTH:
                self._skip_unreadable_name(f"{location}/{min(folders)}", _TOO_DEEP)
                continue
            for name in sorted(folders, reverse=True):  # popped in name order
                stack.append((f"{folder}/{name}", f"{location}/{name}", depth + 1))

    def _skip_unreadable_name(self, location: str, why: str = _UNRENAMED) -> None:
        """A note (or folder) whose name is not UTF-8 is left out: its location could be
        written to no block, record or request; so is a folder too deep. Said once, for
        a person to rename or move it."""
        if location not in self._told:
            if len(self._told) > 4096:
                self._told.clear()
            self._told.add(location)
            logger.warning("%s: %s", shown(location)[:300], why)

    def _note(self, location: str, path: str, st: os.stat_result) -> Note:
        """The note at `path`: the known object while its file is unchanged."""
        topic = self._topics.load_as(path, st, lambda: _topic(Path(path)))
        old = self._notes.get(location)
        if old is not None and old.topic == topic and old.size == st.st_size and (
            old.mtime == st.st_mtime
        ):
            return old
        return Note(location, topic, st.st_size, st.st_mtime)

    def notes(self) -> list[Note]:
        """Every note, by location."""
        return [self._notes[k] for k in sorted(self._notes)]

    def selected(self, globs: list[str] | None = None) -> list[Note]:
        """The notes matching `globs` (under knowledge/; every note if None), by location,
        as of the last `refresh()`. The same list while the notes are unchanged: do not
        modify it."""
        key = None if globs is None else tuple(globs)
        hit = self._selected.get(key)
        if hit is not None and hit[0] == self.version:
            return hit[1]
        patterns = [g.strip().removeprefix("./").removeprefix(_PREFIX) for g in globs or []]
        found = [
            note for note in self.notes()
            if globs is None
            or any(glob_match(p, note.location.removeprefix(_PREFIX)) for p in patterns)
        ]
        if len(self._selected) > 256:  # one entry per distinct ROM `knowledge` list
            self._selected.clear()
        self._selected[key] = (self.version, found)
        return found
