"""The shared knowledge base (knowledge/**/*.md) as KNOWLEDGE block references.

Only a note's topic (its first `# heading`) is read here, and only when the
file changed; its text is loaded later, if the selector keeps the block.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.paths import glob_match
from hivemind.hive.statcache import StatCache
from hivemind.memory.blocks import KnowledgeBlock, Priority

_HEAD_BYTES = 64 * 1024  # the topic heading is near the top; never read a whole big note
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


@dataclass(frozen=True)
class Note:
    """One knowledge file: hive-relative location, topic, size, mtime."""

    location: str
    topic: str
    size: int
    mtime: float


def _topic(path: Path) -> str:
    with path.open("rb") as f:
        head = f.read(_HEAD_BYTES).decode("utf-8", errors="replace")
    if head.startswith("---"):  # skip a front matter block
        end = re.search(r"^(?:---|\.\.\.)[ \t]*$", head[3:], re.MULTILINE)
        head = head[3 + end.end() :] if end else head
    match = _HEADING.search(head)
    return match.group(1).strip() if match else path.stem


class KnowledgeIndex:
    """Topics of the notes under knowledge/, refreshed by stat (changed files only)."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self._topics: StatCache[str] = StatCache()
        self._notes: dict[str, Note] = {}

    def refresh(self) -> bool:
        """Re-scan knowledge/; re-reads only changed files. True if anything changed."""
        root = self.hive.knowledge_dir
        notes: dict[str, Note] = {}
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not is_temp_name(d))
            for name in files:
                if is_temp_name(name) or not name.endswith(".md"):
                    continue
                path = Path(folder) / name
                try:
                    st = path.lstat()
                    if not stat.S_ISREG(st.st_mode):
                        continue  # a symlink could point outside the hive
                    topic = self._topics.load(path, st, _topic)
                except OSError:
                    continue
                location = path.relative_to(self.hive.root).as_posix()
                notes[location] = Note(location, topic, st.st_size, st.st_mtime)
        changed = notes != self._notes
        self._notes = notes
        return changed

    def notes(self) -> list[Note]:
        """Every note, by location."""
        return [self._notes[k] for k in sorted(self._notes)]

    def blocks(self, globs: list[str] | None = None) -> list[KnowledgeBlock]:
        """KNOWLEDGE blocks (MEDIUM) of the notes matching `globs` (under knowledge/;
        every note if None). Call `refresh()` first to see changes on disk."""
        if not self._notes:
            self.refresh()
        prefix = "knowledge/"
        patterns = [g.strip().removeprefix("./").removeprefix(prefix) for g in globs or []]
        out = []
        for note in self.notes():
            inside = note.location.removeprefix(prefix)
            if globs is not None and not any(glob_match(p, inside) for p in patterns):
                continue
            out.append(
                KnowledgeBlock(
                    topic=note.topic,
                    location=note.location,
                    priority=Priority.MEDIUM,
                    timestamp=datetime.fromtimestamp(note.mtime, UTC),
                    metadata={"bytes": note.size},
                )
            )
        return out
