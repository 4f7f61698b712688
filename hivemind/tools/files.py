"""File tools: read_file, write_file, edit_file, list_files, search_files.

Every path goes through `resolve_inside`: reads are confined to the hive's
readable folders, writes to workspace/ and knowledge/.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path
from typing import Any

import regex
from pydantic import BaseModel, Field

from hivemind.errors import ToolError
from hivemind.hive.atomic import atomic_write_steps, run_async
from hivemind.hive.paths import resolve_inside
from hivemind.memory.blocks import FileBlock, Priority
from hivemind.tools.base import ANY, Footprint, Tool, ToolContext

MAX_WRITE_BYTES = 1_000_000
MAX_READ_LINES = 2_000
MAX_LIST_ENTRIES = 200
MAX_SEARCH_FILE_BYTES = 2_000_000
SEARCH_SECONDS = 2.0
"""A search gives up after this long: a pattern that backtracks without end (`(a|aa)+$`)
must not hold the cycle, or the daemon's shutdown, for ever. `regex` (not `re`) can
stop a match under way."""


class ReadFileInput(BaseModel):
    path: str = Field(description="Path relative to the hive root, e.g. workspace/notes.md")
    start_line: int | None = Field(default=None, ge=1, description="First line (1-based)")
    end_line: int | None = Field(default=None, ge=1, description="Last line (inclusive)")


class WriteFileInput(BaseModel):
    path: str = Field(description="Path under workspace/ or knowledge/")
    content: str = Field(description="The whole new content of the file")


class EditFileInput(BaseModel):
    path: str = Field(description="Path under workspace/ or knowledge/")
    old: str = Field(min_length=1, description="Exact text to replace; must occur exactly once")
    new: str = Field(description="Replacement text")


class ListFilesInput(BaseModel):
    path: str = Field(default="workspace", description="Folder relative to the hive root")


class SearchFilesInput(BaseModel):
    pattern: str = Field(min_length=1, description="Regular expression (Python syntax)")
    path: str = Field(default="workspace", description="Folder to search, relative to the hive")
    max_results: int = Field(default=50, ge=1, le=200)


def _readable(ctx: ToolContext, path: str) -> Path:
    # A hard link may be another name of a file outside the hive: refused for reads too.
    return resolve_inside(ctx.hive.root, path, ctx.hive.readable_dirs, forbid_hardlinks=True)


def _writable(ctx: ToolContext, path: str) -> Path:
    return resolve_inside(ctx.hive.root, path, ctx.hive.writable_dirs, forbid_hardlinks=True)


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise ToolError(f"{path.name}: no such file")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise ToolError(f"{path.name}: binary file, not shown")
    return data.decode("utf-8", errors="replace")


async def read_file(ctx: ToolContext, args: ReadFileInput) -> str:
    path = _readable(ctx, args.path)
    text = await asyncio.to_thread(_read_text, path)
    lines = text.splitlines()
    start = args.start_line or 1
    end = min(args.end_line or len(lines), len(lines), start + MAX_READ_LINES - 1)
    if lines and start > len(lines):
        raise ToolError(f"{args.path} has {len(lines)} lines; start_line {start} is past the end")
    rel = ctx.hive.relative(path)
    ranged = args.start_line is not None or args.end_line is not None or end < len(lines)
    # Pin the file so the next cycles keep it in view without another call.
    ctx.working.add(
        FileBlock(
            location=rel,
            start_line=start if ranged and lines else None,
            end_line=end if ranged and lines else None,
            priority=Priority.HIGH,
        )
    )
    body = "\n".join(f"{n:>5}  {line}" for n, line in enumerate(lines[start - 1 : end], start))
    more = f"\n[... {len(lines) - end} more lines; ask for start_line={end + 1}]" if end < len(
        lines
    ) else ""
    return f"{rel} (lines {start}-{end} of {len(lines)})\n{body}{more}"


async def _atomic_write(path: Path, content: str, fsync: bool) -> None:
    """Write inline (microseconds); only the wait for the disk goes to a worker thread."""
    try:
        await run_async(atomic_write_steps(path, content, fsync=fsync))
    except FileNotFoundError:
        if path.parent.is_dir():
            raise
        path.parent.mkdir(parents=True, exist_ok=True)  # a new folder: made on first write
        await run_async(atomic_write_steps(path, content, fsync=fsync))


async def write_file(ctx: ToolContext, args: WriteFileInput) -> str:
    size = len(args.content.encode("utf-8"))
    if size > MAX_WRITE_BYTES:
        raise ToolError(f"content is {size} bytes; the limit is {MAX_WRITE_BYTES}")
    path = _writable(ctx, args.path)
    if path.is_dir():
        raise ToolError(f"{args.path} is a folder")
    await _atomic_write(path, args.content, ctx.board.fsync)
    rel = ctx.hive.relative(path)
    ctx.effects.files_written.append(rel)
    return f"wrote {rel} ({size} bytes)"


async def edit_file(ctx: ToolContext, args: EditFileInput) -> str:
    path = _writable(ctx, args.path)
    text = await asyncio.to_thread(_read_text, path)
    found = text.count(args.old)
    if found != 1:
        raise ToolError(
            f"`old` occurs {found} times in {args.path}; it must occur exactly once "
            "(add surrounding lines to make it unique)"
        )
    await _atomic_write(path, text.replace(args.old, args.new, 1), ctx.board.fsync)
    rel = ctx.hive.relative(path)
    ctx.effects.files_written.append(rel)
    return f"edited {rel}"


def _list(root: Path, hive_root: Path) -> list[str]:
    if not root.is_dir():
        raise ToolError(f"{root.name}: no such folder")
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            p = Path(dirpath) / name
            out.append(f"{p.relative_to(hive_root).as_posix()}  ({p.stat().st_size} bytes)")
            if len(out) >= MAX_LIST_ENTRIES:
                out.append(f"[... stopped at {MAX_LIST_ENTRIES} entries]")
                return out
    return out


async def list_files(ctx: ToolContext, args: ListFilesInput) -> str:
    root = _readable(ctx, args.path)
    entries = await asyncio.to_thread(_list, root, ctx.hive.root)
    return "\n".join(entries) if entries else f"{args.path} is empty"


def _own_file(path: Path) -> bool:
    """A regular file with one name: a symlink or a hard link may reach outside the hive."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1


def _search(
    root: Path, hive_root: Path, pattern: regex.Pattern[str], limit: int, deadline: float
) -> list[str]:
    hits: list[str] = []
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if _own_file(p))
    for p in files:
        if any(part.startswith(".") for part in p.relative_to(hive_root).parts):
            continue
        try:
            if p.stat().st_size > MAX_SEARCH_FILE_BYTES:
                continue
            data = p.read_bytes()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue
        rel = p.relative_to(hive_root).as_posix()
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            # TimeoutError once the deadline passes, even inside one match
            if pattern.search(line, timeout=max(0.0, deadline - time.monotonic())):
                hits.append(f"{rel}:{n}: {line[:300]}")
                if len(hits) >= limit:
                    return hits
    return hits


async def search_files(ctx: ToolContext, args: SearchFilesInput) -> str:
    try:
        pattern = regex.compile(args.pattern)
    except regex.error as exc:
        raise ToolError(f"invalid pattern: {exc}") from exc
    root = _readable(ctx, args.path)
    deadline = time.monotonic() + SEARCH_SECONDS
    try:
        hits = await asyncio.to_thread(
            _search, root, ctx.hive.root, pattern, args.max_results, deadline
        )
    except TimeoutError:
        raise ToolError(
            f"search stopped after {SEARCH_SECONDS:g} s: the pattern is too slow on these "
            "files (nested repeats like (a+)+ backtrack without end); use a simpler "
            "pattern or a narrower path"
        ) from None
    return "\n".join(hits) if hits else "no match"


# Reads see the whole hive (another call's mail, task or file); a whole-file write is
# blind; an edit reads what it rewrites.
_READS = Footprint.of(reads=[ANY])
_WRITES = Footprint.of(writes=["files"])
_EDITS = Footprint.of(reads=["files"], writes=["files"])

FILE_TOOLS: list[Tool[Any]] = [
    Tool(
        "read_file",
        "Read a file of the hive (workspace/, knowledge/, tasks/, agents/), optionally a "
        "line range; the file then stays in view in your next cycles.",
        ReadFileInput,
        read_file,
        touches=_READS,
    ),
    Tool(
        "write_file",
        "Create or replace a file under workspace/ or knowledge/.",
        WriteFileInput,
        write_file,
        touches=_WRITES,
    ),
    Tool(
        "edit_file",
        "Replace one exact occurrence of `old` with `new` in a file under workspace/ or "
        "knowledge/.",
        EditFileInput,
        edit_file,
        touches=_EDITS,
    ),
    Tool(
        "list_files",
        "List the files under a folder of the hive.",
        ListFilesInput,
        list_files,
        touches=_READS,
    ),
    Tool(
        "search_files",
        "Search files of a hive folder for a regular expression; returns path:line: text.",
        SearchFilesInput,
        search_files,
        touches=_READS,
    ),
]
