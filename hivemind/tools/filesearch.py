"""search_files: a bounded grep over a hive folder.

So many hits, no binary, huge or linked file, a pattern vetted before it is compiled
(`searchpattern`), and one deadline for walking, reading and matching: a big tree or
a pattern that backtracks without end (`(a|aa)+$`) must not hold the cycle, or the
daemon's shutdown, for ever. `regex` (not `re`) can stop a match under way.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import regex
from pydantic import BaseModel, Field

from hivemind.errors import ToolError
from hivemind.fs.paths import resolve_inside
from hivemind.tools.base import ToolContext
from hivemind.tools.filewalk import FolderWalk
from hivemind.tools.searchpattern import compile_pattern

MAX_SEARCH_FILE_BYTES = 2_000_000
SEARCH_SECONDS = 2.0
SNIFF_BYTES = 8192
"""A NUL byte this near the start marks a binary file."""


class SearchFilesInput(BaseModel):
    pattern: str = Field(min_length=1)
    path: str = "workspace"
    max_results: int = Field(default=50, ge=1, le=200)


@dataclass
class _Search:
    pattern: regex.Pattern[str]
    root: Path
    shown_root: str  # `root` as the model names it
    limit: int
    deadline: float
    hits: list[str] = field(default_factory=list)
    files: int = 0
    stopped_in: str | None = None  # the file the deadline stopped the search in

    def file(self, path: Path) -> None:
        """Search one file; stops (setting `stopped_in`) once the deadline passes."""
        try:
            with path.open("rb") as fh:
                data = fh.read(MAX_SEARCH_FILE_BYTES + 1)
        except OSError:
            return
        if len(data) > MAX_SEARCH_FILE_BYTES or b"\x00" in data[:SNIFF_BYTES]:
            return
        self.files += 1
        below = path.relative_to(self.root).as_posix()
        rel = self.shown_root if below == "." else f"{self.shown_root}/{below}"
        # Lines as read_file numbers them: split at \n only.
        for n, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.stopped_in = rel
                return
            try:
                found = self.pattern.search(line.removesuffix("\r"), timeout=left)
            except TimeoutError:
                if left >= SEARCH_SECONDS / 4:  # one match took that long: the pattern
                    raise
                self.stopped_in = rel  # the deadline came while matching, not because of it
                return
            if found:
                self.hits.append(f"{rel}:{n}: {line[:300]}")
                if len(self.hits) >= self.limit:
                    return

    def done(self) -> bool:
        return len(self.hits) >= self.limit or self.stopped_in is not None


def _own_file(entry: os.DirEntry[str]) -> bool:
    """A regular file with one name: a symlink or a hard link may reach outside the hive."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_size <= MAX_SEARCH_FILE_BYTES


def _run(
    root: Path, shown_root: str, pattern_text: str, limit: int, deadline: float
) -> tuple[_Search, FolderWalk | None]:
    search = _Search(compile_pattern(pattern_text), root, shown_root, limit, deadline)
    if not root.is_dir():
        search.file(root)
        return search, None
    walk = FolderWalk(root, deadline)
    for entry in walk:
        if _own_file(entry):
            search.file(Path(entry.path))
            if search.done():
                break
    return search, walk


async def search_files(ctx: ToolContext, args: SearchFilesInput) -> str:
    root = resolve_inside(ctx.hive.root, args.path, ctx.hive.readable_dirs, forbid_hardlinks=True)
    if not (root.is_dir() or root.is_file()):
        raise ToolError(f"{args.path}: no such folder or file")
    deadline = time.monotonic() + SEARCH_SECONDS
    try:
        search, walk = await asyncio.to_thread(
            _run, root, ctx.hive.relative(root), args.pattern, args.max_results, deadline
        )
    except TimeoutError:
        raise ToolError(
            f"search stopped after {SEARCH_SECONDS:g} s: the pattern is too slow on these "
            "files (nested repeats like (a+)+ backtrack without end); use a simpler "
            "pattern or a narrower path"
        ) from None
    lines = search.hits or ["no match"]
    searched = f"{search.files} files searched"
    if search.stopped_in is not None:
        lines.append(
            f"[... search stopped after {SEARCH_SECONDS:g} s in {search.stopped_in}; "
            f"{searched}, the rest not; ask for a narrower path]"
        )
    elif walk is not None and walk.stopped_at is not None and not search.done():
        lines.append(
            f"[... search {walk.why(SEARCH_SECONDS)} in {ctx.hive.relative(walk.stopped_at)}; "
            f"{searched}, the rest not; ask for a narrower path]"
        )
    if walk is not None and walk.too_deep is not None:
        lines += walk.deep_note(ctx.hive.relative(walk.too_deep))
    return "\n".join(lines)
