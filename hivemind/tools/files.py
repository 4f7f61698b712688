"""File tools: read_file, write_file, edit_file, list_files, search_files.

Every path goes through `resolve_inside`: reads are confined to the hive's
readable folders, writes to workspace/ and knowledge/. No call reads more of a file, or
walks longer, than its bound; search_files lives in `filesearch`.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from hivemind.clock import utcnow
from hivemind.errors import ToolError
from hivemind.fs.atomic import atomic_write_steps
from hivemind.fs.paths import resolve_inside
from hivemind.fs.steps import run_async
from hivemind.memory.blocks import BlockType, FileBlock, Priority
from hivemind.tools.base import ANY, MAX_RESULT_CHARS, Footprint, Tool, ToolContext
from hivemind.tools.excerpt import SNIFF_BYTES, read_excerpt
from hivemind.tools.filesearch import SearchFilesInput, search_files
from hivemind.tools.filewalk import FolderWalk

MAX_WRITE_BYTES = 1_000_000
MAX_READ_LINES = 2_000
MAX_LIST_ENTRIES = 200
LIST_SECONDS = 2.0
PIN_TTL = timedelta(hours=1)
"""How long read_file keeps a file in view when the agent holds no task (a pin made
for tasks lasts until they end)."""
READ_BUDGET = MAX_RESULT_CHARS - 500
"""read_file's lines fit the result with room for its header and last line, so the
cut in `execute` never falls inside them."""


class ReadFileInput(BaseModel):
    path: str
    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)
    start_char: int = Field(default=0, ge=0)  # a long line's cut note says what to give


class WriteFileInput(BaseModel):
    path: str
    content: str


class EditFileInput(BaseModel):
    path: str
    old: str = Field(min_length=1)
    new: str


class ListFilesInput(BaseModel):
    path: str = "workspace"


def _readable(ctx: ToolContext, path: str) -> Path:
    # A hard link may be another name of a file outside the hive: refused for reads too.
    return resolve_inside(ctx.hive.root, path, ctx.hive.readable_dirs, forbid_hardlinks=True)


def _writable(ctx: ToolContext, path: str) -> Path:
    return resolve_inside(ctx.hive.root, path, ctx.hive.writable_dirs, forbid_hardlinks=True)


async def read_file(ctx: ToolContext, args: ReadFileInput) -> str:
    if args.end_line is not None and args.end_line < (args.start_line or 1):
        raise ToolError(
            f"end_line {args.end_line} is before start_line {args.start_line}: the range "
            "is reversed"
        )
    path = _readable(ctx, args.path)
    rel = ctx.hive.relative(path)
    start = args.start_line or 1
    part = await asyncio.to_thread(
        read_excerpt, path, rel, start, args.end_line, READ_BUDGET, MAX_READ_LINES,
        args.start_char,
    )
    if part.total == 0:
        _pin(ctx, rel, None, None)
        return f"{rel} is empty"
    of = f"of {part.total}" if part.total is not None else f"of a {part.size} byte file"
    whole = start == 1 and part.last == part.total and not part.cut_note and not part.first_char
    ranged = args.start_line is not None or args.end_line is not None or not whole
    # Pin what was shown, so the next cycles keep it in view without another call.
    _pin(ctx, rel, start if ranged else None, part.last if ranged else None)
    tail = part.cut_note
    wanted_more = args.end_line is None or part.last < args.end_line
    if wanted_more and (part.total is None or part.last < part.total):
        left = f"{part.total - part.last} more lines" if part.total is not None else "more"
        tail = "\n".join(
            filter(None, [tail, f"[... {left}; ask for start_line={part.last + 1}]"])
        )
    within = f", line {start} from character {part.first_char}" if part.first_char else ""
    header = f"{rel} (lines {start}-{part.last} {of}{within})"
    return "\n".join(filter(None, [header, part.body, tail]))


def _pin(ctx: ToolContext, rel: str, start: int | None, end: int | None) -> None:
    """Keep `rel` (lines `start`-`end`, or all of it) in view as a HIGH FILE block.

    The pin lasts as long as one of the tasks held now (perceive drops it once none
    is held), or `PIN_TTL` when none is held. Pinned again, the block stays the same
    one, timestamp included (the cached prefix holds), with its life renewed. A whole
    file takes the place of its range pins; a range of a file pinned whole adds
    nothing."""
    held = list(ctx.active_tasks)
    life: dict[str, Any] = {
        "metadata": {"task_ids": held} if held else {},
        "expiry": None if held else utcnow() + PIN_TTL,
        "gone": False,
        "priority": Priority.HIGH,
    }
    working = ctx.working
    if start is None:
        for block in working.by_type(BlockType.FILE):
            if isinstance(block, FileBlock) and block.location == rel and (
                block.start_line is not None
            ):
                working.remove(block.id)
    else:
        whole = working.get(rel)
        if isinstance(whole, FileBlock) and whole.priority is Priority.HIGH:
            working.add(whole.model_copy(update=life))
            return
    pinned = FileBlock(location=rel, start_line=start, end_line=end, **life)
    old = working.get(pinned.id)
    if isinstance(old, FileBlock):
        pinned = old.model_copy(update=life)  # its timestamp too
    working.add(pinned)


async def _atomic_write(path: Path, content: str, fsync: bool, mode: int | None) -> None:
    """Write inline (microseconds); only the wait for the disk goes to a worker thread.
    `mode`: the permission bits of the file replaced (None: a new file)."""
    try:
        await run_async(atomic_write_steps(path, content, fsync=fsync, mode=mode))
    except FileNotFoundError:
        if path.parent.is_dir():
            raise
        path.parent.mkdir(parents=True, exist_ok=True)  # a new folder: made on first write
        await run_async(atomic_write_steps(path, content, fsync=fsync, mode=mode))


def _replaced_mode(path: Path, shown: str) -> int | None:
    """The permission bits of the regular file a write to `path` replaces (None: there
    is none); a ToolError for anything else there. A FIFO, socket or device is never
    opened (that could block) nor replaced by a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{shown} is a folder")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{shown} is not a regular file")
    return stat.S_IMODE(st.st_mode)


async def write_file(ctx: ToolContext, args: WriteFileInput) -> str:
    size = len(args.content.encode("utf-8"))
    if size > MAX_WRITE_BYTES:
        raise ToolError(f"content is {size} bytes; the limit is {MAX_WRITE_BYTES}")
    path = _writable(ctx, args.path)
    rel = ctx.hive.relative(path)
    mode = _replaced_mode(path, rel)
    await _atomic_write(path, args.content, ctx.board.fsync, mode)
    ctx.effects.files_written.append(rel)
    return f"wrote {rel} ({size} bytes)"


def _edited(path: Path, shown: str, old: str, new: str) -> tuple[str, int]:
    """The text of `path` with `old` replaced by `new`, and the file's permission bits;
    or a ToolError that says why not.

    Only a UTF-8 text file within the write limit is edited: anything else could not be
    written back unchanged around the edit."""
    if _replaced_mode(path, shown) is None:
        raise ToolError(f"{shown}: no such file")
    too_big = (f"{shown} is over {MAX_WRITE_BYTES} bytes, the most edit_file edits; "
               "write_file replaces a whole file")
    # Non-blocking: should a FIFO take the file's place after the lstat, the open does
    # not wait for a writer, and the fstat refuses it.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{shown} is not a regular file")
        if st.st_size > MAX_WRITE_BYTES:
            raise ToolError(too_big)
        data = fh.read(MAX_WRITE_BYTES + 1)  # it may have grown since the stat
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError(too_big)
    if b"\x00" in data[:SNIFF_BYTES]:
        raise ToolError(f"{shown}: binary file, not edited")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{shown} is not valid UTF-8 (byte {exc.start}); edit_file would damage it; "
            "write_file replaces a whole file"
        ) from None
    found = text.count(old)
    if found != 1:
        raise ToolError(
            f"`old` occurs {found} times in {shown}; it must occur exactly once "
            "(add surrounding lines to make it unique)"
        )
    result = text.replace(old, new, 1)
    size = len(result.encode("utf-8"))
    if size > MAX_WRITE_BYTES:
        raise ToolError(
            f"the edited file would be {size} bytes; the limit is {MAX_WRITE_BYTES}"
        )
    return result, stat.S_IMODE(st.st_mode)


async def edit_file(ctx: ToolContext, args: EditFileInput) -> str:
    path = _writable(ctx, args.path)
    rel = ctx.hive.relative(path)
    text, mode = await asyncio.to_thread(_edited, path, rel, args.old, args.new)
    await _atomic_write(path, text, ctx.board.fsync, mode)
    ctx.effects.files_written.append(rel)
    return f"edited {rel}"


def _describe(entry: os.DirEntry[str], shown: str) -> str | None:
    """One line of a listing, from the entry itself (a link is not followed); None if
    it is gone."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"{shown}  (symbolic link, not followed)"
    if stat.S_ISREG(st.st_mode):
        return f"{shown}  ({st.st_size} bytes)"
    return f"{shown}  (not a regular file)"


def _list(root: Path, shown_root: str, deadline: float) -> tuple[list[str], FolderWalk]:
    walk = FolderWalk(root, deadline)
    out: list[str] = []
    for entry in walk:
        below = Path(entry.path).relative_to(root).as_posix()
        line = _describe(entry, f"{shown_root}/{below}")
        if line is None:
            continue
        out.append(line)
        if len(out) >= MAX_LIST_ENTRIES:
            out.append(f"[... stopped at {MAX_LIST_ENTRIES} entries]")
            break
    return out, walk


async def list_files(ctx: ToolContext, args: ListFilesInput) -> str:
    root = _readable(ctx, args.path)
    if not root.is_dir():
        raise ToolError(f"{args.path}: no such folder")
    shown = ctx.hive.relative(root)
    deadline = time.monotonic() + LIST_SECONDS
    entries, walk = await asyncio.to_thread(_list, root, shown, deadline)
    if walk.stopped_at is not None:
        entries.append(
            f"[... listing {walk.why(LIST_SECONDS)} in {ctx.hive.relative(walk.stopped_at)}; "
            "ask for a narrower path]"
        )
    if walk.too_deep is not None:
        entries += walk.deep_note(ctx.hive.relative(walk.too_deep))
    return "\n".join(entries) if entries else f"{args.path} is empty"


# Reads see the whole hive (another call's mail, task or file); a whole-file write is
# blind; an edit reads what it rewrites.
_READS = Footprint.of(reads=[ANY])
_WRITES = Footprint.of(writes=["files"])
_EDITS = Footprint.of(reads=["files"], writes=["files"])

FILE_TOOLS: list[Tool[Any]] = [
    Tool(
        "read_file",
        "Read a file, or lines of it; it stays in view in later cycles.",
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
        "Replace `old` (found once) by `new` in a file under workspace/ or knowledge/.",
        EditFileInput,
        edit_file,
        touches=_EDITS,
    ),
    Tool(
        "list_files",
        "List the files under a hive folder.",
        ListFilesInput,
        list_files,
        touches=_READS,
    ),
    Tool(
        "search_files",
        "Search a hive folder's files for a Python regex; returns path:line: text.",
        SearchFilesInput,
        search_files,
        touches=_READS,
    ),
]
