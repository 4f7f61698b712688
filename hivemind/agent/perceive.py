"""Perceive: sync an agent's working memory with the hive on disk.

Blocks are references (paths, ids), so perceiving reads directories and stats
files, never file contents. Each actionable input gets a key; the cycle calls
the model only when some key was not seen before (an idle hive costs nothing).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from hivemind.agent.prompt import TEAM
from hivemind.hive.knowledge import KnowledgeIndex
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.mailbox import Mailbox, MailItem
from hivemind.hive.models import AgentConfig
from hivemind.hive.tasks import TaskBoard, TaskRef
from hivemind.memory.blocks import (
    BlockType,
    FileBlock,
    MessageBlock,
    Priority,
    RomBlock,
    StatusBlock,
    TaskBlock,
    utcnow,
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


def _stat_key(path: Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "missing"
    return f"{st.st_mtime_ns}:{st.st_size}"


def task_block(hive: Hive, ref: TaskRef) -> TaskBlock:
    t = ref.task
    return TaskBlock(
        task_id=t.id,
        title=t.title,
        location=hive.relative(ref.path),
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
        block.expiry = utcnow() + READ_MAIL_TTL
    return block


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
    rom_path = hive.rom_path(name)
    working.add(RomBlock(agent=name, location=hive.relative(rom_path)))
    keys = {f"rom:{_stat_key(rom_path)}"}

    active = {ref.task.id: ref for ref in board.active(name)}
    for block in working.by_type(BlockType.TASK):
        if isinstance(block, TaskBlock) and block.task_id not in active:
            working.remove(block.id)
    for ref in active.values():
        working.add(task_block(hive, ref))
        keys.add(f"task:{ref.task.id}:{_stat_key(ref.path)}")

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
    for item in mailbox.read_items(READ_MAIL_KEPT):
        block = message_block(hive, name, item)
        if block.id not in unread_ids and block.id not in working:
            working.add(block)

    knowledge.refresh()
    globs = config.knowledge or None
    notes = knowledge.blocks(globs)
    wanted = {b.id for b in notes}
    for block in working.by_type(BlockType.KNOWLEDGE):
        if block.id not in wanted:
            working.remove(block.id)
    for kb in notes:
        working.add(kb)

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


def matches_any(path: str, globs: list[str]) -> bool:
    return any(fnmatch.fnmatch(path, g) for g in globs)
