"""The hive's own files an MCP server runs, which the user's trust covers by content.

A stdio server is often a script inside the hive (`args: [tools/notes_server.py]`): a
`git pull` could change it after the user trusted the ROM's block. So the trust records
the sha256 of each regular file in the hive that the server's `command` or `args` name
(an argument `--opt=path`, `-m package.module` and the words of `sh -c "…"` too,
resolved from its `cwd`), with the Python or JavaScript files beside such a script
(it imports them before the standard library's), and a changed, new or removed file
needs trusting again. A name that resolves
outside the hive through a link or `..` is refused, as everywhere in a hive. Hashes are
cached by (size, mtime, ctime, inode): checking before each cycle costs a `stat` per
file (ctime too: a file written in place with its old mtime put back is hashed again).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hivemind.mcpspec import McpServerSpec, expand

MAX_BYTES = 64 * 1024 * 1024
"""A file the trust would have to hash that is larger than this is refused."""
_MAX_NAME = 4096
MAX_BESIDE = 500
"""Entries of a script's folder looked at for what it would import from there."""
_FAMILIES: tuple[tuple[str, ...], ...] = ((".py",), (".js", ".mjs", ".cjs", ".ts"))
_cache: dict[str, tuple[tuple[int, ...], str]] = {}
_folders: dict[str, tuple[int, ...]] = {}  # a script's folder → its stat when listed
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class ServerFiles:
    """The hive files a server runs, `hive-relative path → sha256`, or why it may not."""

    digests: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    """One line: a name that leads out of the hive, a file too large to hash."""

    def changed_since(self, trusted: Mapping[str, str]) -> list[str]:
        """The files whose bytes are not the ones trusted (`trusted`: as recorded), new
        ones, and trusted ones now gone (a script turned into a folder of the same name
        with a `__main__.py` in it, which Python runs instead)."""
        return sorted(p for p in {*self.digests, *trusted}
                      if trusted.get(p) != self.digests.get(p))


def server_files(spec: McpServerSpec, hive_root: Path) -> ServerFiles:
    """Which of the hive's files `spec` runs, hashed (none for an HTTP server)."""
    if spec.command is None:
        return ServerFiles()
    root = os.path.realpath(hive_root)
    base = os.path.join(root, spec.cwd) if spec.cwd else root
    if not _inside(os.path.realpath(base), root):
        return ServerFiles(problem=f"cwd {spec.cwd!r} resolves outside the hive")
    digests: dict[str, str] = {}
    try:
        for name in _named_paths(spec, base):
            _take(name, os.path.join(base, name), root, digests)
        for rel in list(digests):  # what a script imports from beside it, first
            for name in _beside(os.path.join(root, rel)):
                _take(name, name, root, digests)
    except _Refused as refused:
        return ServerFiles(problem=str(refused))
    return ServerFiles(digests)


class _Refused(Exception):
    """A name the server runs that the trust cannot cover (str: why, one line)."""


def _take(name: str, path: str, root: str, digests: dict[str, str]) -> None:
    """Hash the file `path` (`name` as the ROM says it) into `digests` if it is one of
    the hive's; _Refused if it leads out of the hive or cannot be hashed."""
    try:
        lexical_inside = _inside(os.path.normpath(path), root)
        if not os.path.lexists(path):
            return
        real = os.path.realpath(path)
        if not _inside(real, root):
            if lexical_inside or not os.path.isabs(name):
                raise _Refused(f"{name!r} resolves outside the hive ({real!r})")
            return  # a file of the user's own system, shown at trust as written
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            return
        if st.st_size > MAX_BYTES:
            raise _Refused(f"{name!r} is too large to trust ({st.st_size // (1024 * 1024)} MB)")
        digests[Path(os.path.relpath(real, root)).as_posix()] = _digest(real, st)
    except (OSError, ValueError) as exc:
        raise _Refused(f"{name!r} cannot be read: "
                       f"{getattr(exc, 'strerror', None) or exc}") from None


def _beside(script: str) -> list[str]:
    """The files beside a Python or JavaScript script that it would import before any
    other of that name: a `json.py` dropped beside `server.py` shadows the standard
    library's (Python puts the script's folder first). Not what sits deeper down."""
    family = next((f for f in _FAMILIES if script.endswith(f)), None)
    if family is None:
        return []
    folder = os.path.dirname(script)
    try:
        seen = _stat_key(os.stat(folder))  # before the listing: a later entry changes it
        names = sorted(os.listdir(folder))[:MAX_BESIDE]
    except OSError:
        return []
    with _cache_lock:
        _folders[folder] = seen
    out = []
    for name in names:
        path = os.path.join(folder, name)
        if name.endswith(family):
            out.append(path)
        elif family == _FAMILIES[0] and os.path.isdir(path):
            out.append(os.path.join(path, "__init__.py"))  # a package of that name
    return out


def look_unchanged(hive_root: Path, digests: Mapping[str, str]) -> bool:
    """Whether the files of `digests` (as `server_files` gave them) look the same, by
    their `stat` alone: False for any whose hash would have to be taken again."""
    root = os.path.realpath(hive_root)
    for rel, digest in digests.items():
        path = os.path.join(root, rel)
        folder = os.path.dirname(path)
        with _cache_lock:
            listed = _folders.get(folder)
        try:  # a module dropped beside a script: its folder changed
            if listed is not None and _stat_key(os.stat(folder)) != listed:
                return False
        except OSError:
            return False
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return False
        with _cache_lock:
            known = _cache.get(path)
        if known != (_stat_key(st), digest):
            return False
    return True


def _stat_key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def program(command: str, base: str, search_path: str | None) -> str | None:
    """The file `command` runs from the server's folder `base`: a name with a folder is
    in `base`; a bare one is looked up on `search_path`, whose relative entries (".",
    "tools/bin", an empty one) are folders of `base`, never of the daemon's own folder."""
    if os.sep in command or (os.altsep and os.altsep in command):
        return os.path.join(base, command)
    entries = [e if os.path.isabs(e) else os.path.join(base, e or ".")
               for e in (search_path or os.defpath).split(os.pathsep)]
    return shutil.which(command, path=os.pathsep.join(entries))


def search_path(spec: McpServerSpec, environ: Mapping[str, str]) -> str | None:
    """The PATH a server's command is looked up on: the ROM's `env` PATH, else yours."""
    given = spec.env.get("PATH")
    return expand(given, environ) if given is not None else environ.get("PATH")


def _named_paths(spec: McpServerSpec, base: str) -> Iterator[str]:
    """Every name in the command line that could be a file: the program the command
    runs, each argument (each word of one with spaces), the path of `--opt=path`, the
    file of `-m module`."""
    if spec.command is not None:
        found = program(spec.command, base, search_path(spec, os.environ))
        if found is not None:
            yield found
    module_next = False
    for arg in spec.args:
        if not arg or len(arg) > _MAX_NAME or "\0" in arg:
            continue
        if module_next:
            module = arg.replace(".", "/")
            yield f"{module}.py"
            yield f"{module}/__main__.py"
            yield f"{module}/__init__.py"
        module_next = arg == "-m"
        # A command line in one argument (`sh -c "python3 tools/x.py"`): each word.
        for word in _words(arg) if any(c.isspace() for c in arg) else [arg]:
            yield word
            yield os.path.join(word, "__main__.py")  # a folder Python runs
            if word.startswith("-") and "=" in word:
                yield word.partition("=")[2]


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # an unclosed quote
        return text.split()


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _digest(path: str, st: os.stat_result) -> str:
    key = _stat_key(st)
    with _cache_lock:
        known = _cache.get(path)
    if known is not None and known[0] == key:
        return known[1]
    # No link followed, no FIFO waited on: it may have been swapped since the stat.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        h = hashlib.sha256()
        while chunk := f.read(1024 * 1024):
            h.update(chunk)
    digest = h.hexdigest()
    with _cache_lock:
        _cache[path] = (key, digest)
    return digest
