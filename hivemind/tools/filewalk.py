"""Walking a hive folder for list_files and search_files: sorted, links not followed,
hidden names skipped, `MAX_DEPTH` levels at most, and stopped by a deadline or an
oversized folder, saying where."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

from hivemind.fs.treewalk import MAX_DEPTH

MAX_FOLDER_ENTRIES = 100_000
"""A folder with more entries than this is not read further (its names alone would
take a second and a lot of memory)."""


class FolderWalk:
    """The entries that are not folders below `root`, in path order; a folder is
    entered only if it is one itself (a link to a folder is yielded, not followed).

    Iteration ends early, with `stopped_at` set to the folder it was in, once
    `deadline` (time.monotonic) has passed or a folder is too big.
    """

    def __init__(self, root: Path, deadline: float) -> None:
        self.root = root
        self.deadline = deadline
        self.stopped_at: Path | None = None
        self.too_deep: Path | None = None  # the first folder left out for its depth
        self.stop_reason = ""

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def stop(self, where: Path, reason: str) -> None:
        self.stopped_at, self.stop_reason = where, reason

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        return self._walk(self.root, 0)

    def deep_note(self, relative: str) -> list[str]:
        """The line to add to the walk's output if folders were left out as too deep
        (`relative`: the first of them as the model names it), else none."""
        if self.too_deep is None:
            return []
        return [f"[... folders more than {MAX_DEPTH} levels down are left out, from "
                f"{relative}]"]

    def _walk(self, folder: Path, depth: int) -> Iterator[os.DirEntry[str]]:
        entries = self._entries(folder)
        if entries is None:
            return
        for entry in entries:
            if self.stopped_at is not None:
                return
            if self.expired():
                self.stop(folder, "time")
                return
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile
            if is_folder and depth + 1 >= MAX_DEPTH:
                self.too_deep = self.too_deep or Path(entry.path)  # said once, by the caller
            elif is_folder:
                yield from self._walk(Path(entry.path), depth + 1)
            else:
                yield entry

    def _entries(self, folder: Path) -> list[os.DirEntry[str]] | None:
        """The visible entries of `folder` by name; None if unreadable or the walk stopped."""
        found: list[os.DirEntry[str]] = []
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    if self.expired():
                        self.stop(folder, "time")
                        return None
                    if len(found) >= MAX_FOLDER_ENTRIES:
                        self.stop(folder, "size")
                        return None
                    if not entry.name.startswith("."):
                        found.append(entry)
        except OSError:
            if folder == self.root:
                raise
            return None  # unreadable or gone: the rest of the tree is still walked
        found.sort(key=lambda e: e.name)
        return found

    def why(self, seconds: float) -> str:
        """Why the walk stopped, to follow "search" or "listing"."""
        if self.stop_reason == "time":
            return f"stopped after {seconds:g} s"
        return f"stopped: the folder has more than {MAX_FOLDER_ENTRIES} entries"
