"""perceive: what it puts in working memory equals what a fresh perception would."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hivemind.agent import perceive as perceive_module
from hivemind.agent.perceive import READ_MAIL_TTL, _stat_key, note_block, perceive
from hivemind.hive.knowledge import KnowledgeIndex
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, MailItem, PostOffice
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.ref import TaskRef
from hivemind.memory.blocks import (
    BlockType,
    KnowledgeBlock,
    MessageBlock,
    Priority,
    StatusBlock,
    TaskBlock,
)
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from tests.helpers import write_agent, write_task

AGENT = "worker"


class Perceiver:
    """One agent's perception inputs over a real hive, as the cycle wires them."""

    def __init__(self, hive: Hive, knowledge: list[str] | None = None) -> None:
        self.hive = hive
        self.config = AgentConfig(name=AGENT, knowledge=knowledge or [])
        self.board = TaskBoard(hive, settle_time=0)
        self.mailbox = Mailbox(hive, AGENT)
        self.knowledge = KnowledgeIndex(hive)
        self.working = WorkingMemoryManager()

    def run(self) -> set[str]:
        p = perceive(self.hive, self.config, self.board, self.mailbox, self.knowledge,
                     self.working, {})
        return p.input_keys


def claim(hive: Hive, board: TaskBoard, stem: str) -> TaskRef:
    write_task(hive, stem, f"Work on {stem}.")
    ref = next(r for r in board.scan_pending() if r.path.stem == stem)
    claimed = board.claim(ref, AGENT)
    assert claimed is not None
    return claimed


def note(hive: Hive, name: str, text: str) -> Path:
    path = hive.knowledge_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    old = time.time() - 10  # out of the racy window: a re-read is decided by the stat
    os.utime(path, (old, old))
    return path


def knowledge_view(working: WorkingMemoryManager) -> list[dict[str, object]]:
    return [b.model_dump() for b in working.by_type(BlockType.KNOWLEDGE)]


def fresh_knowledge(hive: Hive, globs: list[str] | None = None) -> list[dict[str, object]]:
    """What a first perception (no cache anywhere) puts in a new working memory."""
    fresh = Perceiver(hive, globs)
    fresh.run()
    return knowledge_view(fresh.working)


def test_unchanged_notes_keep_their_blocks_and_any_change_replaces_them(hive: Hive) -> None:
    write_agent(hive, AGENT)
    style = note(hive, "style.md", "# Style\n\nBe brief.\n")
    note(hive, "python/typing.md", "# Typing\n")
    agent = Perceiver(hive)
    agent.run()
    first = {b.id: b for b in agent.working.by_type(BlockType.KNOWLEDGE)}
    agent.run()
    again = {b.id: b for b in agent.working.by_type(BlockType.KNOWLEDGE)}
    assert all(again[k] is first[k] for k in first)  # nothing to redo
    assert knowledge_view(agent.working) == fresh_knowledge(hive)

    # An edited note: a new topic of the same size, then only a new mtime, then a new size.
    note(hive, "style.md", "# Tone\n\nBe brief.\n")
    agent.run()
    assert agent.working.get("knowledge/style.md") is not first["knowledge/style.md"]
    assert knowledge_view(agent.working) == fresh_knowledge(hive)
    os.utime(style, (time.time() - 5, time.time() - 5))
    agent.run()
    assert knowledge_view(agent.working) == fresh_knowledge(hive)
    note(hive, "style.md", "# House style\n\nBe brief, be kind.\n")
    agent.run()
    assert knowledge_view(agent.working) == fresh_knowledge(hive)

    # A block changed in memory (by assignment, or its metadata in place) is made again.
    assert agent.working.update_confidence("knowledge/python/typing.md", 0.2)
    block = agent.working.get("knowledge/style.md")
    assert isinstance(block, KnowledgeBlock)
    block.metadata["seen"] = True
    agent.run()
    assert knowledge_view(agent.working) == fresh_knowledge(hive)

    # A FILE block of the same id (read_file of the note) gives way to the note's block.
    from hivemind.memory.blocks import FileBlock

    agent.working.add(FileBlock(location="knowledge/style.md"))
    agent.run()
    assert knowledge_view(agent.working) == fresh_knowledge(hive)

    # A deleted note, and a ROM that narrows the notes to a glob.
    style.unlink()
    agent.run()
    assert knowledge_view(agent.working) == fresh_knowledge(hive)
    agent.config = AgentConfig(name=AGENT, knowledge=["python/**"])
    agent.run()
    assert knowledge_view(agent.working) == fresh_knowledge(hive, ["python/**"])
    assert [b["location"] for b in knowledge_view(agent.working)] == [
        "knowledge/python/typing.md"
    ]


def test_notes_are_found_as_os_walk_finds_them(hive: Hive) -> None:
    note(hive, "a.md", "# A\n")
    note(hive, "sub/b.md", "# B\n")
    note(hive, "sub/deeper/c.md", "no heading\n")
    note(hive, ".hidden/d.md", "# D\n")
    note(hive, "sub/.draft.md", "# Draft\n")
    note(hive, "notes.txt", "# Not markdown\n")
    (hive.knowledge_dir / "dir.md").mkdir()
    outside = hive.root.parent / "outside"
    outside.mkdir()
    (outside / "e.md").write_text("# Outside\n")
    (hive.knowledge_dir / "linked").symlink_to(outside, target_is_directory=True)
    (hive.knowledge_dir / "link.md").symlink_to(outside / "e.md")
    index = KnowledgeIndex(hive)
    index.refresh()
    assert [(n.location, n.topic) for n in index.notes()] == [
        ("knowledge/a.md", "A"),
        ("knowledge/sub/b.md", "B"),
        ("knowledge/sub/deeper/c.md", "c"),
    ]


def test_task_blocks_and_keys_name_files_as_hive_relative_and_stat_do(hive: Hive) -> None:
    write_agent(hive, AGENT)
    agent = Perceiver(hive)
    refs = [claim(hive, agent.board, stem) for stem in ("t1", "t2")]
    keys = agent.run()
    for ref in refs:
        block = agent.working.get(f"task:{ref.id}")
        assert isinstance(block, TaskBlock)
        assert block.location == hive.relative(ref.path) == f"tasks/active/{AGENT}/{ref.id}.md"
        assert f"task:{ref.id}:{_stat_key(ref.path)}" in keys

    # A task file that is a symlink, and an active folder that is one, are never read
    # through (even to a file inside the hive): they go to tasks/rejected/.
    target = hive.workspace_dir / "real-t3.md"
    target.write_text("---\nid: t3\n---\n# t3\n")
    link = hive.active_dir_for(AGENT) / "t3.md"
    link.symlink_to(target)
    agent.run()
    assert agent.working.get("task:t3") is None
    assert (hive.rejected_dir / "t3.md").is_symlink()

    real = hive.root / "elsewhere"
    hive.active_dir_for(AGENT).rename(real)
    hive.active_dir_for(AGENT).symlink_to(real, target_is_directory=True)
    agent.run()
    assert all(agent.working.get(f"task:{ref.id}") is None for ref in refs)
    assert (hive.rejected_dir / AGENT).is_symlink()


def test_the_rom_block_and_key_name_the_rom_as_hive_relative_and_stat_do(hive: Hive) -> None:
    rom = write_agent(hive, AGENT)
    agent = Perceiver(hive)
    keys = agent.run()
    block = agent.working.get(f"rom:{AGENT}")
    assert block is not None and block.model_dump()["location"] == hive.relative(rom)
    assert f"rom:{_stat_key(rom)}" in keys

    # A ROM that is a symlink, then an agent folder that is one.
    real = hive.workspace_dir / "rom.md"
    real.write_text(rom.read_text())
    rom.unlink()
    rom.symlink_to(real)
    keys = agent.run()
    block = agent.working.get(f"rom:{AGENT}")
    assert block is not None and block.model_dump()["location"] == "workspace/rom.md"
    assert f"rom:{_stat_key(rom)}" in keys
    rom.unlink()
    folder = hive.agent_dir(AGENT)
    folder.rename(hive.root / "other")
    folder.symlink_to(hive.root / "other", target_is_directory=True)
    (hive.root / "other" / "ROM.md").write_text("# worker\n")
    keys = agent.run()
    block = agent.working.get(f"rom:{AGENT}")
    assert block is not None and block.model_dump()["location"] == "other/ROM.md"
    assert f"rom:{_stat_key(rom)}" in keys

    # No ROM at all.
    (hive.root / "other" / "ROM.md").unlink()
    assert "rom:missing" in agent.run()


def test_perceived_blocks_are_what_their_classes_make_of_the_same_arguments(
    hive: Hive,
) -> None:
    # What perception puts in memory must be indistinguishable from new blocks made of
    # the same arguments (the selector and builder reuse work by comparing fields).
    from hivemind.agent.perceive import task_block
    from hivemind.memory.blocks import RomBlock, StatusBlock

    write_agent(hive, AGENT)
    agent = Perceiver(hive)
    ref = claim(hive, agent.board, "t1")
    figures = {"tasks": {"pending": 0, "active": 1}, "budget": 5}
    for _ in range(2):
        perceive(hive, agent.config, agent.board, agent.mailbox, agent.knowledge,
                 agent.working, figures)
    made = {
        f"rom:{AGENT}": RomBlock(agent=AGENT, location=f"agents/{AGENT}/ROM.md"),
        "task:t1": task_block(hive, ref),
        # a state with no task is left out of the figures shown
        "status:hive": StatusBlock(status_type="hive",
                                   value={"tasks": {"active": 1}, "budget": 5}),
    }
    for bid, expected in made.items():
        got = agent.working.get(bid)
        assert got is not None and type(got) is type(expected)
        assert got.model_fields_set == expected.model_fields_set
        mine, theirs = got.model_dump(), expected.model_dump()
        assert abs((mine.pop("timestamp") - theirs.pop("timestamp")).total_seconds()) < 5
        assert mine == theirs
        assert [type(v) for v in got.__dict__.values()] == [
            type(v) for v in expected.__dict__.values()
        ]
    # Each cycle's block has containers of its own.
    task = agent.working.get("task:t1")
    assert isinstance(task, TaskBlock)
    task.metadata["scribble"] = 1
    task.dependencies.append("x")
    agent.run()
    again = agent.working.get("task:t1")
    assert isinstance(again, TaskBlock)
    assert "scribble" not in again.metadata and again.dependencies == []


def test_read_mail_is_named_as_its_block_would_be_before_any_block_is_made(
    hive: Hive,
) -> None:
    from hivemind.agent.perceive import _message_id, message_block
    from hivemind.hive.mailbox import PostOffice
    from hivemind.memory.mailids import mail_entry_id

    write_agent(hive, AGENT)
    post = PostOffice(hive)
    agent = Perceiver(hive)
    for subject in ("one", "two"):
        post.send("human", AGENT, subject, "Count the bees.")
    for item in agent.mailbox.unread():
        agent.mailbox.mark_read(item)
    items = agent.mailbox.read_items(10)
    assert len(items) == 2
    for item in items:
        assert _message_id(hive, item) == message_block(hive, AGENT, item).id
    agent.run()
    assert {b.id for b in agent.working.by_type(BlockType.MESSAGE)} == {
        message_block(hive, AGENT, i).id for i in items
    }
    # The mailbox lists no symlinks, but the id must still follow Hive.relative for one
    # (it resolves the file, and so its name), and for a file gone meanwhile.
    target = hive.workspace_dir / "kept-message.md"
    target.write_text(items[0].path.read_text())
    link = items[0].path.with_name("link.md")
    link.symlink_to(target)
    linked = MailItem(items[0].message, link, read=True)
    assert _message_id(hive, linked) == message_block(hive, AGENT, linked).id
    assert _message_id(hive, linked) == mail_entry_id("kept-message.md")
    gone = MailItem(items[0].message, link.with_name("gone.md"), read=True)
    assert _message_id(hive, gone) == message_block(hive, AGENT, gone).id
    assert _message_id(hive, gone) == mail_entry_id("gone.md")


def test_unread_mail_is_high_and_read_mail_medium_until_an_hour_after_it_was_read(
    hive: Hive,
) -> None:
    write_agent(hive, AGENT)
    post = PostOffice(hive)
    post.send(HUMAN, AGENT, "first", "Read me.")
    post.send(HUMAN, AGENT, "second", "Me too.")
    p = Perceiver(hive)
    p.run()
    first = next(i for i in p.mailbox.unread() if i.message.subject == "first")
    read_path = p.mailbox.mark_read(first)
    p.working = WorkingMemoryManager()

    p.run()

    blocks = {b.subject: b for b in p.working.by_type(BlockType.MESSAGE)
              if isinstance(b, MessageBlock)}
    assert blocks["second"].priority is Priority.HIGH and blocks["second"].expiry is None
    assert blocks["first"].priority is Priority.MEDIUM and blocks["first"].read
    read_at = datetime.fromtimestamp(read_path.stat().st_ctime, UTC)
    assert blocks["first"].expiry == read_at + READ_MAIL_TTL


def test_read_mail_past_its_hour_is_not_brought_back(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The janitor drops it once expired; the next perception must not add it again."""
    write_agent(hive, AGENT)
    PostOffice(hive).send(HUMAN, AGENT, "old news", "Read long ago.")
    p = Perceiver(hive)
    p.mailbox.mark_read(p.mailbox.unread()[0])
    monkeypatch.setattr(perceive_module, "READ_MAIL_TTL", timedelta(0))  # read an hour ago

    p.run()

    assert p.working.by_type(BlockType.MESSAGE) == []


def test_knowledge_blocks_carry_topic_location_and_priority(hive: Hive) -> None:
    (hive.knowledge_dir / "style.md").write_text(
        "---\ntags: [x]\n---\n# House style\n\nBe brief.\n"
    )
    (hive.knowledge_dir / "python").mkdir()
    (hive.knowledge_dir / "python" / "typing.md").write_text("No heading here.\n")
    (hive.knowledge_dir / ".draft.md").write_text("# Hidden\n")
    index = KnowledgeIndex(hive)
    index.refresh()
    blocks = {b.location: b for b in map(note_block, index.selected())}
    assert set(blocks) == {"knowledge/python/typing.md", "knowledge/style.md"}
    assert blocks["knowledge/style.md"].topic == "House style"
    assert blocks["knowledge/python/typing.md"].topic == "typing"
    assert all(b.priority is Priority.MEDIUM for b in blocks.values())
    assert [n.location for n in index.selected(["python/**"])] == ["knowledge/python/typing.md"]
    assert [n.location for n in index.selected(["knowledge/*.md"])] == ["knowledge/style.md"]


def test_the_status_entry_shows_only_task_counts_an_agent_can_act_on(hive: Hive) -> None:
    """A zero says nothing and rejected files are a person's to fix: both are left out;
    the team is in the system prompt, not here."""
    write_agent(hive, AGENT)
    agent = Perceiver(hive)
    figures = {"tasks": {"pending": 2, "active": 0, "done": 3, "failed": 0, "rejected": 4},
               "team": [[AGENT, "worker"]]}
    perceive(hive, agent.config, agent.board, agent.mailbox, agent.knowledge,
             agent.working, figures)
    status = agent.working.get("status:hive")
    assert isinstance(status, StatusBlock)
    assert json.loads(status.inline_content()) == {"tasks": {"pending": 2, "done": 3}}
