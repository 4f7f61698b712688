"""Which folder is a hive, and finding the one a folder lies in (as git finds a repository).

A folder given by name (`--hive DIR`, `$HIVEMIND_HIVE`) is a hive if it has any of
`tasks/`, `agents/` and `hive.toml`. Looking upward from the current folder asks for
more (`hive.toml`, or both `agents/` and `tasks/`): an agent's `workspace/reports/tasks/`
is no hive, the hive above it is.
"""

from __future__ import annotations

from pathlib import Path

MAX_LEVELS = 64  # folders looked at upward; a path deeper than that is not walked whole


def looks_like_hive(folder: Path) -> bool:
    """True if `folder` has any of tasks/, agents/ and hive.toml (a folder named by hand)."""
    return (folder / "tasks").is_dir() or (folder / "agents").is_dir() or (
        folder / "hive.toml"
    ).is_file()


def is_hive(folder: Path) -> bool:
    """True if `folder` is surely a hive: it has hive.toml, or both agents/ and tasks/."""
    if (folder / "hive.toml").is_file():
        return True
    return (folder / "agents").is_dir() and (folder / "tasks").is_dir()


def find_hive(start: Path) -> Path | None:
    """The nearest folder from `start` upward that is surely a hive (`is_hive`); None if
    there is none up to the file system's root."""
    folder = start.resolve()
    for _ in range(MAX_LEVELS):
        try:
            if is_hive(folder):
                return folder
        except OSError:  # a folder we may not read: look further up
            pass
        if folder.parent == folder:
            return None
        folder = folder.parent
    return None


def enclosing_hive(path: Path) -> Path | None:
    """The hive that `path` lies inside (a folder above it, not `path` itself), if any;
    `path` need not exist."""
    full = path.resolve()
    return None if full.parent == full else find_hive(full.parent)
