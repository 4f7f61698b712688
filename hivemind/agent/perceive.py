"""Perceive: sync an agent's working memory with the hive on disk.

Blocks are references (paths, ids), so perceiving reads directories and stats
files, never file contents. Each actionable input gets a key; the cycle calls
the model only when some key was not seen before (an idle hive costs nothing).
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hivemind.agent.prompt import TEAM
from hivemind.fs.globs import glob_match, glob_root
from hivemind.hive.knowledge import KnowledgeIndex, Note
from hivemind.hive.layout import RUNTIME_FOLDERS, Hive, hive_files
from hivemind.hive.mailbox import Mailbox, MailItem
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.ref import TaskRef
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
from hivemind.memory.mailids import mail_entry_id
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig

READ_MAIL_KEPT = 10
"""Read mails in working memory at most: the newest ones (by when they were sent)."""
READ_MAIL_TTL = timedelta(hours=1)
PREVIEW_CHARS = 200
MESSAGE_INLINE_CHARS = 64 * 1024
"""A message body up to this long is the block's text (the mailbox has parsed it
already); a longer message is loaded from its file, front matter and all, off the loop."""
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
# ... and the FILE blocks it made for watched files, by id.
_WATCH_MADE = "perceive.watched"

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
    """The MESSAGE block of a mail: its body as text; who sent it, the subject, when
    (the block's timestamp) and what it answers go in the metadata."""
    m = item.message
    threading = {"thread": m.thread, "in_reply_to": m.in_reply_to, "task": m.task}
    block = MessageBlock(
        from_agent=m.from_,
        to_agent=agent,
        subject=m.subject,
        preview=m.body[:PREVIEW_CHARS],
        full_path=hive.relative(item.path),
        read=item.read,
        body=m.body if len(m.body) <= MESSAGE_INLINE_CHARS else None,
        priority=Priority.MEDIUM if item.read else Priority.HIGH,
        metadata={"message_id": m.id, **{k: v for k, v in threading.items() if v}},
    )
    if m.sent_at is not None:
        block.timestamp = m.sent_at
    if item.read:
        read_at = item.read_at if item.read_at is not None else time.time()
        block.expiry = datetime.fromtimestamp(read_at, UTC) + READ_MAIL_TTL
    return block


def _message_id(hive: Hive, item: MailItem) -> str:
    """`message_block(...).id` without making the block: made of the name of the file
    as `hive.relative` gives it, which is the file's own name unless it is a symlink
    (resolving a folder on the way keeps the name)."""
    name = item.path.name
    try:
        plain = name not in ("", ".", "..") and not stat.S_ISLNK(os.lstat(item.path).st_mode)
    except OSError:
        plain = True  # nothing to resolve: Hive.relative keeps the path as it is
    if not plain:
        name = hive.relative(item.path).rsplit("/", 1)[-1]
    return mail_entry_id(name)


def watched_files(hive: Hive, globs: list[str]) -> list[Path]:
    """Files of the hive matching the ROM's `watch` globs (never runtime state), as
    `glob_match` matches them: the same files whose changes wake the agent."""
    return list(_watched(hive, globs).values())


def _watched(hive: Hive, globs: list[str]) -> dict[str, Path]:
    """`watched_files`, by hive-relative path."""
    found: dict[str, Path] = {}
    for pattern in globs:
        for rel, path in _glob_files(hive, pattern):
            found.setdefault(rel, path)
            if len(found) >= WATCH_LIMIT:
                return found
    return found


def _glob_files(hive: Hive, pattern: str) -> list[tuple[str, Path]]:
    """(hive-relative path, path) of the regular files matching `pattern`, sorted.
    Folder links are not entered and file links not taken: either could pull in a
    file from outside the hive."""
    base = glob_root(pattern)
    if base.split("/", 1)[0] in RUNTIME_FOLDERS:
        return []
    top = hive.root / base if base else hive.root
    # A link on the way to the glob's folder: each file's own name decides.
    plain = hive.plain_folder(top) is not None if base else True
    out: list[tuple[str, Path]] = []
    for found, where in hive_files(top, base):
        if not glob_match(pattern, found):
            continue
        path = Path(where)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):  # a link, a FIFO...
                continue
        except OSError:
            continue
        rel = found if plain else hive.relative(path)
        if not plain and (Path(rel).is_absolute() or rel.split("/", 1)[0] in RUNTIME_FOLDERS):
            continue
        out.append((rel, path))
    return out


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
    rom_location = hive.relative_in(hive.plain_folder(rom_folder), rom_path, rom_stat)
    working.add(RomBlock(agent=name, location=rom_location))
    keys = {f"rom:{'missing' if rom_stat is None else _version_key(rom_path, rom_stat)}"}

    listed = board.active_stats(name)
    active = {ref.task.id: ref for ref, _ in listed}
    lstats = {ref.path: st for ref, st in listed}
    for block in working.by_type(BlockType.TASK):
        if isinstance(block, TaskBlock) and block.task_id not in active:
            working.remove(block.id)
    folder = hive.plain_folder(hive.active_dir_for(name)) if active else None
    for ref in active.values():
        lst = lstats[ref.path]
        working.add(task_block(hive, ref, hive.relative_in(folder, ref.path, lst)))
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
    kept_read = set()
    for item in mailbox.read_items(READ_MAIL_KEPT):
        # Read mail stays in view for READ_MAIL_TTL after it was read (the janitor then
        # drops it, and it is not brought back). Most is in view already: its id
        # decides, before any block is made.
        if item.read_at is not None and item.read_at <= expired_before:
            continue
        bid = _message_id(hive, item)
        kept_read.add(bid)
        if bid not in unread_ids and bid not in working:
            working.add(message_block(hive, name, item))
    for block in working.by_type(BlockType.MESSAGE):
        # Only the newest READ_MAIL_KEPT read mails stay: older ones leave as new ones come.
        if isinstance(block, MessageBlock) and block.read and block.id not in kept_read:
            working.remove(block.id)

    knowledge.refresh()
    _sync_knowledge(working, knowledge.selected(config.knowledge or None))

    watch_keys = _sync_files(hive, working, active, config.watch)

    # The team goes into the system prompt (stable); the STATUS block keeps what changes.
    working.add(StatusBlock(status_type="hive", value=actionable(figures)))
    return Perception(active=active, unread=unread, input_keys=keys, watch_keys=watch_keys,
                      team=figures.get(TEAM) or [])


UNACTIONABLE = frozenset({"rejected"})
"""Task counts no agent can act on (a rejected file is for a person to fix)."""


def actionable(figures: dict[str, Any]) -> dict[str, Any]:
    """The hive figures an agent's STATUS entry shows (the team is in the system prompt):
    the task counts it can act on, a zero left out (a state missing has no task; no
    `tasks` at all: none to act on)."""
    tasks = figures.get("tasks") or {}
    shown = {k: v for k, v in figures.items() if k not in (TEAM, "tasks")}
    counts = {k: n for k, n in tasks.items() if n and k not in UNACTIONABLE}
    if counts:
        shown["tasks"] = counts
    return shown


def _sync_files(
    hive: Hive, working: WorkingMemoryManager, active: dict[str, TaskRef], globs: list[str]
) -> set[str]:
    """FILE blocks: pins (read_file's) end with the tasks they were made for, and a pin
    whose file is gone is marked so (the context shows it once, then the janitor drops
    it); watch blocks follow the files the `watch` globs match now. Returns the watch
    keys (a watched file's version)."""
    made: dict[str, FileBlock] = working.scratch.get(_WATCH_MADE) or {}
    watched = _watched(hive, globs) if globs else {}
    root = os.fspath(hive.root)
    for block in working.by_type(BlockType.FILE):
        if not isinstance(block, FileBlock):
            continue
        if made.get(block.id) is block:  # a watch block perceive made
            if block.id not in watched:
                working.remove(block.id)
            continue
        tasks = block.metadata.get("task_ids")
        if tasks and not any(t in active for t in tasks):
            working.remove(block.id)  # its tasks ended
            continue
        gone = not _readable_file(os.path.join(root, block.location))
        if gone is not block.gone:
            block.gone = gone
    now: dict[str, FileBlock] = {}
    keys = set()
    for rel, path in watched.items():
        held = working.get(rel)
        if held is None:
            now[rel] = FileBlock(location=rel, priority=Priority.MEDIUM)
            working.add(now[rel])
        elif isinstance(held, FileBlock) and made.get(rel) is held:
            now[rel] = held  # (else a pin holds the file in view meanwhile)
        keys.add(f"watch:{rel}:{_stat_key(path)}")
    working.scratch[_WATCH_MADE] = now
    return keys


def _readable_file(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and os.access(path, os.R_OK)


def note_block(note: Note) -> KnowledgeBlock:
    """The KNOWLEDGE block (MEDIUM) of a note."""
    return KnowledgeBlock(
        topic=note.topic,
        location=note.location,
        priority=Priority.MEDIUM,
        timestamp=datetime.fromtimestamp(note.mtime, UTC),
        metadata={"bytes": note.size},
    )


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
    """True if the hive-relative `path` matches one of `globs` as `watched_files` does."""
    return any(glob_match(g, path) for g in globs)
