"""Perceive: sync an agent's working memory with the hive on disk.

Blocks are references (paths, ids), so perceiving reads directories and stats
files, never file contents. Each actionable input gets a key; the cycle calls
the model only when some key was not seen before (an idle hive costs nothing).
"""

from __future__ import annotations

import fnmatch
import os
import stat
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hivemind.agent.prompt import TEAM
from hivemind.hive.knowledge import KnowledgeIndex, Note, note_block
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.mailbox import Mailbox, MailItem
from hivemind.hive.models import AgentConfig
from hivemind.hive.paths import walk_below
from hivemind.hive.tasks import TaskBoard, TaskRef
from hivemind.memory.blocks import (
    BlockType,
    FileBlock,
    KnowledgeBlock,
    MessageBlock,
    Priority,
    RomBlock,
    StatusBlock,
    TaskBlock,
)
from hivemind.memory.manager import WorkingMemoryManager

READ_MAIL_KEPT = 10
READ_MAIL_TTL = timedelta(hours=1)
PREVIEW_CHARS = 200
WATCH_LIMIT = 200


@dataclass
class Perception:
    """What an agent found on disk this time, and which inputs are actionable."""

    active: dict[str, TaskRef]
    unread: list[MailItem]
    input_keys: set[str] = field(default_factory=set)
    watch_keys: set[str] = field(default_factory=set)
    team: list[list[str]] = field(default_factory=list)  # [name, role] of every agent

    @property
    def has_work(self) -> bool:
        return bool(self.active or self.unread)


# Where perceive keeps, in each working memory's `scratch`, the KNOWLEDGE blocks it made
# there, by id: (note, block, the block's field dict when made).
_NOTES_MADE = "perceive.notes"
NotesMade = dict[str, tuple[Note, KnowledgeBlock, dict[str, Any]]]

def _stat_key(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "missing"
    return f"{st.st_mtime_ns}:{st.st_size}"


def _version_key(path: Path, lst: os.stat_result) -> str:
    """`_stat_key(path)` from the lstat the listing took (a symlink is stat'ed again)."""
    if stat.S_ISLNK(lst.st_mode):
        return _stat_key(path)
    return f"{lst.st_mtime_ns}:{lst.st_size}"


def _plain_folder(hive: Hive, folder: Path) -> str | None:
    """`hive.relative(folder)` when no part of it below the root is a symlink (then the
    relative path of a file in it is plain string work), else None."""
    root = os.fspath(hive.root)
    walked = walk_below(root, os.fspath(folder))
    if walked is None:
        return None
    return walked[0][len(root.rstrip("/")) + 1 :]


def _relative(
    hive: Hive, folder: str | None, path: Path, lst: os.stat_result | None
) -> str:
    """`hive.relative(path)` for a file (lstat `lst`, None if missing) in a folder that
    `_plain_folder` vouched for: the same string without one lstat per part of the path
    (`Hive.relative` only departs from the plain string at a symlink)."""
    if folder is None or (lst is not None and stat.S_ISLNK(lst.st_mode)):
        return hive.relative(path)
    return f"{folder}/{path.name}"


def task_block(hive: Hive, ref: TaskRef, location: str | None = None) -> TaskBlock:
    """The TASK block of an active task (`location`: `hive.relative(ref.path)`, if known)."""
    t = ref.task
    return TaskBlock(
        task_id=t.id,
        title=t.title,
        location=hive.relative(ref.path) if location is None else location,
        project=t.project,
        dependencies=list(t.depends_on),
        status="active",
        priority=Priority.CRITICAL if t.priority.value == "critical" else Priority.HIGH,
        metadata={
            k: v
            for k, v in {
                "reply_to": t.reply_to,
                "domain": t.domain,
                "task_type": t.task_type,
                "attempts": t.attempts,
            }.items()
            if v
        },
    )


def message_block(hive: Hive, agent: str, item: MailItem) -> MessageBlock:
    m = item.message
    block = MessageBlock(
        from_agent=m.from_,
        to_agent=agent,
        subject=m.subject,
        preview=m.body[:PREVIEW_CHARS],
        full_path=hive.relative(item.path),
        read=item.read,
        priority=Priority.MEDIUM if item.read else Priority.HIGH,
        metadata={"message_id": m.id, **({"task": m.task} if m.task else {})},
    )
    if m.sent_at is not None:
        block.timestamp = m.sent_at
    if item.read:
        read_at = item.read_at if item.read_at is not None else time.time()
        block.expiry = datetime.fromtimestamp(read_at, UTC) + READ_MAIL_TTL
    return block


def _message_id(hive: Hive, item: MailItem) -> str:
    """`message_block(...).id` without making the block: `msg:` and the name of the file
    as `hive.relative` gives it, which is the file's own name unless it is a symlink
    (resolving a folder on the way keeps the name)."""
    name = item.path.name
    try:
        plain = name not in ("", ".", "..") and not stat.S_ISLNK(os.lstat(item.path).st_mode)
    except OSError:
        plain = True  # nothing to resolve: Hive.relative keeps the path as it is
    if not plain:
        name = hive.relative(item.path).rsplit("/", 1)[-1]
    return f"msg:{name}"


def watched_files(hive: Hive, globs: list[str]) -> list[Path]:
    """Files of the hive matching the ROM's `watch` globs (never runtime state)."""
    if not globs:
        return []
    found: list[Path] = []
    for pattern in globs:
        for p in sorted(hive.root.glob(pattern)):
            rel = hive.relative(p)
            if rel.startswith((".hivemind", "mailboxes")) or is_temp_name(p.name):
                continue
            # A symlink, or a folder link on the way, could pull in a file from outside.
            if p.is_file() and not p.is_symlink() and not Path(rel).is_absolute():
                found.append(p)
            if len(found) >= WATCH_LIMIT:
                return found
    return found


def perceive(
    hive: Hive,
    config: AgentConfig,
    board: TaskBoard,
    mailbox: Mailbox,
    knowledge: KnowledgeIndex,
    working: WorkingMemoryManager,
    figures: dict[str, Any],
) -> Perception:
    """Bring `working` in line with the disk; return the actionable inputs."""
    name = config.name
    rom_path, rom_folder = hive.rom_path(name), hive.agent_dir(name)
    try:
        rom_stat: os.stat_result | None = os.lstat(rom_path)
    except OSError:
        rom_stat = None
    rom_location = _relative(hive, _plain_folder(hive, rom_folder), rom_path, rom_stat)
    working.add(RomBlock(agent=name, location=rom_location))
    keys = {f"rom:{'missing' if rom_stat is None else _version_key(rom_path, rom_stat)}"}

    listed = board.active_stats(name)
    active = {ref.task.id: ref for ref, _ in listed}
    lstats = {ref.path: st for ref, st in listed}
    for block in working.by_type(BlockType.TASK):
        if isinstance(block, TaskBlock) and block.task_id not in active:
            working.remove(block.id)
    folder = _plain_folder(hive, hive.active_dir_for(name)) if active else None
    for ref in active.values():
        lst = lstats[ref.path]
        working.add(task_block(hive, ref, _relative(hive, folder, ref.path, lst)))
        keys.add(f"task:{ref.task.id}:{_version_key(ref.path, lst)}")

    unread = mailbox.unread()
    unread_ids = set()
    for item in unread:
        block = message_block(hive, name, item)
        working.add(block)
        unread_ids.add(block.id)
        keys.add(f"mail:{item.message.id}")
    for block in working.by_type(BlockType.MESSAGE):
        # Mail read since (now in cur/) must not stay in view as unread: it would be
        # answered again every cycle, and its path in new/ no longer exists.
        if isinstance(block, MessageBlock) and not block.read and block.id not in unread_ids:
            working.remove(block.id)
    expired_before = time.time() - READ_MAIL_TTL.total_seconds()
    for item in mailbox.read_items(READ_MAIL_KEPT):
        # Read mail stays in view for READ_MAIL_TTL after it was read (the janitor then
        # drops it, and it is not brought back). Most is in view already: its id
        # decides, before any block is made.
        if item.read_at is not None and item.read_at <= expired_before:
            continue
        bid = _message_id(hive, item)
        if bid not in unread_ids and bid not in working:
            working.add(message_block(hive, name, item))

    knowledge.refresh()
    _sync_knowledge(working, knowledge.selected(config.knowledge or None))

    watch_keys = set()
    for path in watched_files(hive, config.watch):
        rel = hive.relative(path)
        if rel not in working:
            working.add(FileBlock(location=rel, priority=Priority.MEDIUM))
        watch_keys.add(f"watch:{rel}:{_stat_key(path)}")

    # The team goes into the system prompt (stable); the STATUS block keeps what changes.
    working.add(StatusBlock(
        status_type="hive", value={k: v for k, v in figures.items() if k != TEAM}
    ))
    return Perception(active=active, unread=unread, input_keys=keys, watch_keys=watch_keys,
                      team=figures.get(TEAM) or [])


def _sync_knowledge(working: WorkingMemoryManager, notes: list[Note]) -> None:
    """One KNOWLEDGE block per note, and no others. A block perceive made from the same
    note that nobody changed since stays: a new one would be equal to it, field for
    field, and costs a validation (and the selector and builder their caches)."""
    wanted = {note.location for note in notes}
    for block in working.by_type(BlockType.KNOWLEDGE):
        if block.id not in wanted:
            working.remove(block.id)
    made: NotesMade = working.scratch.get(_NOTES_MADE) or {}
    now: NotesMade = {}
    for note in notes:
        kept = made.get(note.location)
        if (
            kept is not None
            and kept[0] == note
            and working.get(note.location) is kept[1]
            and kept[1].__dict__ is kept[2]  # pydantic gives a new dict on any assignment
            and kept[1].metadata == {"bytes": note.size}  # the one field changed in place
        ):
            now[note.location] = kept
            continue
        kb = note_block(note)
        working.add(kb)
        now[note.location] = (note, kb, kb.__dict__)
    working.scratch[_NOTES_MADE] = now


def matches_any(path: str, globs: list[str]) -> bool:
    return any(fnmatch.fnmatch(path, g) for g in globs)
