"""The hive on disk (DESIGN §2): where every kind of file lives."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

from hivemind.errors import ConfigError
from hivemind.fs.paths import first_link, leads_out, walk_below
from hivemind.fs.treewalk import walk

HUMAN = "human"
"""The mailbox people read; not an agent."""

# Names an editor or a half-finished write uses; never read as hive content.
_TEMP_SUFFIXES = ("~", ".swp", ".swo", ".swx", ".tmp", ".part", ".crdownload")


def is_temp_name(name: str) -> bool:
    """True for editor temp / hidden names (`.*`, `*~`, `*.swp`, `*.tmp`, ...)."""
    return name.startswith(".") or name.startswith("#") or name.endswith(_TEMP_SUFFIXES)


RUNTIME_FOLDERS = frozenset({".hivemind", "mailboxes"})
"""Top folders of a hive no `watch` glob sees: runtime state and the agents' mail."""


def hive_files(top: Path, base: str) -> Iterator[tuple[str, str]]:
    """(hive-relative path, path) of the files below `top`, the hive's folder `base`
    ("" for its root), in name order: no temp names, no runtime folder at the root,
    folder links not entered."""
    for folder, dirs, files in walk(os.fspath(top)):
        below = os.path.relpath(folder, top).replace(os.sep, "/")
        prefix = "/".join(p for p in (base, "" if below == "." else below) if p)
        prefix = prefix + "/" if prefix else ""
        dirs[:] = sorted(d for d in dirs if not is_temp_name(d)
                         and not (not prefix and d in RUNTIME_FOLDERS))
        for name in sorted(files):
            if not is_temp_name(name):
                yield prefix + name, os.path.join(folder, name)


def has_rom(path: Path) -> bool:
    """Whether `path` (an agent's ROM.md) is there and no folder: a FIFO or a device
    there is an agent whose ROM is refused (it keeps its last good config), not none."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


class Hive:
    """Paths of one hive. Folders are created on demand by `ensure()`."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()
        self._root = os.fspath(self.root)
        self._root_prefix = self._root.rstrip("/") + "/"
        self._children: dict[str, dict[str, Path]] = {}

    def __repr__(self) -> str:
        return f"Hive({str(self.root)!r})"

    def _child(self, kind: str, parent: Path, name: str, leaf: str = "") -> Path:
        """`parent / name` (`/ leaf` if given), built once: the same few folders and
        files are named on every cycle."""
        cache = self._children.setdefault(kind, {})
        path = cache.get(name)
        if path is None:
            if len(cache) > 4096:  # names come from files and models: keep it bounded
                cache.clear()
            path = parent / name
            path = cache[name] = path / leaf if leaf else path
        return path

    # -- top level -----------------------------------------------------------
    @cached_property
    def config_file(self) -> Path:
        return self.root / "hive.toml"

    @cached_property
    def agents_dir(self) -> Path:
        return self.root / "agents"

    @cached_property
    def knowledge_dir(self) -> Path:
        return self.root / "knowledge"

    @cached_property
    def mailboxes_dir(self) -> Path:
        return self.root / "mailboxes"

    @cached_property
    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    @cached_property
    def workspace_dir(self) -> Path:
        return self.root / "workspace"

    @cached_property
    def state_dir(self) -> Path:
        return self.root / ".hivemind"

    # -- agents --------------------------------------------------------------
    def agent_dir(self, name: str) -> Path:
        return self._child("agents", self.agents_dir, name)

    def rom_path(self, name: str) -> Path:
        return self._child("roms", self.agents_dir, name, "ROM.md")

    def is_agent(self, name: str) -> bool:
        """True if agents/<name>/ROM.md exists (and the name is a plain folder name)."""
        return (
            bool(name) and "/" not in name and not is_temp_name(name)
            and not os.path.islink(self.agent_dir(name)) and has_rom(self.rom_path(name))
        )

    def agent_names(self) -> list[str]:
        """Agents = folders of agents/ holding a ROM.md, sorted; never `human`, the
        person's name (its mailbox is theirs: see `reserved_agent_folder`)."""
        try:
            entries = list(os.scandir(self.agents_dir))
        except OSError:
            return []
        return sorted(  # a link to a folder is no agent (see `unrun_agent_folders`)
            e.name for e in entries
            if e.is_dir(follow_symlinks=False) and not is_temp_name(e.name) and e.name != HUMAN
            and has_rom(Path(e.path, "ROM.md"))
        )

    def unrun_agent_folders(self) -> list[str]:
        """Why each folder of agents/ with a ROM.md that is not run is not: agents/human/
        (see `reserved_agent_folder`), and links (their files would be read from wherever
        they lead)."""
        try:
            entries = sorted(os.scandir(self.agents_dir), key=lambda e: e.name)
        except OSError:
            entries = []
        reserved = self.reserved_agent_folder()
        return ([] if reserved is None else [reserved]) + [
            f"agents/{e.name}/: a link to a folder is not run as an agent; make it a real "
            "folder" for e in entries if e.is_symlink() and not is_temp_name(e.name)]

    def reserved_agent_folder(self) -> str | None:
        """Why agents/human/ is not run, if it holds a ROM.md (else None)."""
        if not (self.agents_dir / HUMAN / "ROM.md").is_file():
            return None
        return (f"agents/{HUMAN}/: not run as an agent: `{HUMAN}` is the person's name "
                f"(mailboxes/{HUMAN}/ is their mail); rename the folder")

    # -- tasks ---------------------------------------------------------------
    @cached_property
    def active_dir(self) -> Path:
        return self.tasks_dir / "active"

    def active_dir_for(self, agent: str) -> Path:
        return self._child("active", self.active_dir, agent)

    @cached_property
    def done_dir(self) -> Path:
        return self.tasks_dir / "done"

    @cached_property
    def failed_dir(self) -> Path:
        return self.tasks_dir / "failed"

    @cached_property
    def rejected_dir(self) -> Path:
        return self.tasks_dir / "rejected"

    # -- mail ----------------------------------------------------------------
    def mailbox_dir(self, name: str) -> Path:
        return self._child("mailboxes", self.mailboxes_dir, name)

    # -- runtime state -------------------------------------------------------
    @cached_property
    def lock_file(self) -> Path:
        return self.state_dir / "daemon.lock"

    @cached_property
    def status_file(self) -> Path:
        return self.state_dir / "status.json"

    @cached_property
    def memory_db(self) -> Path:
        return self.state_dir / "memory.db"

    @cached_property
    def audit_dir(self) -> Path:
        return self.state_dir / "audit"

    def audit_path(self, agent: str) -> Path:
        return self.audit_dir / f"{agent}.jsonl"

    def last_good_rom_path(self, agent: str) -> Path:
        """A copy of the agent's last valid ROM.md: an invalid edit keeps it working,
        across restarts too."""
        return self.state_dir / "roms" / f"{agent}.md"

    # -- confinement ---------------------------------------------------------
    @cached_property
    def writable_dirs(self) -> tuple[Path, ...]:
        """Where agents' write tools may write."""
        return (self.workspace_dir, self.knowledge_dir)

    @cached_property
    def readable_dirs(self) -> tuple[Path, ...]:
        """Where agents' read tools may read (never .hivemind/ or mailboxes)."""
        return (self.workspace_dir, self.knowledge_dir, self.tasks_dir, self.agents_dir)

    def relative(self, path: Path) -> str:
        """`path` relative to the hive root as a POSIX string (or absolute if outside)."""
        # Most paths lie under the (real) root with no symlink below it: then only
        # their parts below the root are stat'ed. Anything else resolves in full.
        walked = walk_below(self._root, os.fspath(path))
        if walked is not None:
            return walked[0][len(self._root_prefix):]
        try:
            return path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return path.as_posix()

    def plain_folder(self, folder: Path) -> str | None:
        """`relative(folder)` when no part of it below the root is a symlink, else None:
        then `relative_in` names a file in it by string work alone."""
        walked = walk_below(self._root, os.fspath(folder))
        return None if walked is None else walked[0][len(self._root_prefix):]

    def relative_in(self, plain: str | None, path: Path, lst: os.stat_result | None) -> str:
        """`relative(path)` for a file (lstat `lst`, None if missing) in a folder that
        `plain_folder` named `plain` (None: it could not): the same string without one
        lstat per part of the path (`relative` departs from it only at a symlink)."""
        if plain is None or (lst is not None and stat.S_ISLNK(lst.st_mode)):
            return self.relative(path)
        return f"{plain}/{path.name}"

    def ensure(self) -> Hive:
        """Create the folders of the layout that are missing; returns self. A folder of
        the layout that is a link out of the hive is refused (ConfigError, one line)."""
        if (linked := folder_link_out(self)) is not None:
            raise ConfigError(linked)
        for d in (
            self.agents_dir,
            self.knowledge_dir,
            self.mailboxes_dir,
            self.tasks_dir,
            self.active_dir,
            self.done_dir,
            self.failed_dir,
            self.rejected_dir,
            self.workspace_dir,
            self.state_dir,
            self.audit_dir,
        ):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise ConfigError(
                    f"{d}: the hive needs a folder here, but a file is in the way; move it"
                ) from None
        return self


def hive_folders(hive: Hive) -> Iterator[Path]:
    """The folders of the layout, and the folders of each agent's mail."""
    yield from (hive.agents_dir, hive.knowledge_dir, hive.mailboxes_dir, hive.tasks_dir,
                hive.workspace_dir, hive.state_dir, hive.active_dir, hive.done_dir,
                hive.failed_dir, hive.rejected_dir, hive.audit_dir)  # fmt: skip
    try:
        boxes = [e.name for e in os.scandir(hive.mailboxes_dir)]
    except OSError:
        return
    for name in sorted(boxes):
        box = hive.mailbox_dir(name)
        yield box
        yield from (box / "tmp", box / "new", box / "cur")


def folder_link_out(hive: Hive) -> str | None:
    """One line naming the first folder of the hive that is a link out of it, or the
    first link among the runtime's own files (the runtime would read and write
    there); None if there is none (DESIGN §3)."""
    root = os.fspath(hive.root)
    for folder in hive_folders(hive):
        target = leads_out(root, folder)
        if target is not None:
            return (f"{os.path.relpath(folder, root)}/: a link to {target}, outside the hive; "
                    "the runtime does not follow links out of a hive: make it a real folder")
    # A cloned hive may carry a link among the runtime's own files in .hivemind/: the
    # lock file truncated, the audit appended to, through it.
    linked = first_link((hive.state_dir, hive.audit_dir, hive.state_dir / "roms",
                         hive.state_dir / "mcp"))
    if linked is None:
        return None
    return (f"{os.path.relpath(linked, hive.root)}: a link; .hivemind/ holds the runtime's "
            "own files and no link is followed there: remove it")
