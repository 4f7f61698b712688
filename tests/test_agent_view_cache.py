"""The caches behind a cycle's view change nothing the model is sent.

One agent runs perceive + view cycle after cycle with its long-lived caches (knowledge
index, selector, builder, loader, token counter); after each change on disk or in
memory, the same step is redone with nothing cached, and both must agree exactly:
the blocks perceived, the selection (kept, dropped and why, estimates, scores) and the
built context (entries, JSON, token counts).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hivemind.agent.cycle import Agent
from hivemind.agent.perceive import Perception, perceive
from hivemind.agent.services import HiveServices
from hivemind.agent.view import ContextView
from hivemind.hive.knowledge import KnowledgeIndex
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.ref import TaskRef
from hivemind.llm.offline import OfflineProvider
from hivemind.memory.blocks import BlockType, ContextBlock, FileBlock, HistoryBlock, Priority
from hivemind.memory.builder import BuiltContext, ContextBuilder
from hivemind.memory.compressor import MemoryCompressor
from hivemind.memory.loader import ContentLoader
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.memory.relevance import RelevanceScorer
from hivemind.memory.selector import MemorySelector, Selection
from hivemind.memory.tokens import TokenCounter
from tests.helpers import write_agent, write_task

AGENT = "worker"
NOW = datetime(2030, 1, 1, tzinfo=UTC)  # one clock for both sides: scores are comparable
FIGURES = {"tasks": {"pending": 3, "active": 2}}
# Blocks perceive stamps with the time it runs: two perceptions differ in that alone.
STAMPED = {BlockType.ROM, BlockType.TASK, BlockType.STATUS}


def clock() -> datetime:
    return NOW


class CachedAgent:
    """The agent as the daemon runs it, its scorer on a fixed clock and its selector
    re-stat'ing every time (the 1 s trust in a stat is a documented trade, not a cache
    that may differ from a fresh build)."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self.services = HiveServices.open(hive, OfflineProvider())
        self.services.board.settle_time = 0
        self.agent = Agent(AGENT, self.services)
        self.agent.context.scorer = RelevanceScorer(now=clock)
        self.agent.context.selector = MemorySelector(
            self.services.loader, self.services.counter, self.agent.context.scorer,
            self.services.compressor.max_block_tokens, stat_ttl=0.0,
        )
        self.figures = dict(FIGURES)

    @property
    def working(self) -> WorkingMemoryManager:
        return self.agent.working

    def perceive(self) -> Perception:
        cfg = self.agent.config()
        assert cfg is not None
        return perceive(self.hive, cfg, self.services.board, self.agent.mailbox,
                        self.services.knowledge, self.working, self.figures)

    def view(self, p: Perception, budget: int) -> ContextView:
        cfg = self.agent.config()
        assert cfg is not None
        return asyncio.run(self.agent.context.view(cfg, p, budget))


def fresh_perceive(hive: Hive, cached: CachedAgent, before: list[Any]) -> WorkingMemoryManager:
    """perceive from the same memory with a new index, board, mailbox and memory object."""
    working = WorkingMemoryManager()
    for block in before:
        working.add(block)
    cfg = cached.agent.config()
    assert cfg is not None
    perceive(hive, cfg, TaskBoard(hive, settle_time=0), Mailbox(hive, AGENT),
             KnowledgeIndex(hive), working, cached.figures)
    return working


class Shadow:
    """The content a fresh build would find loaded: a loader (and its counter) that sees
    the same loads as the agent's. The loader's content cache is what estimates are made
    from, by design: a cold one estimates from file sizes, so a fresh selector must read
    the same cache to decide the same. Everything else is made new for every step."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self.counter = TokenCounter()
        self.loader = ContentLoader(hive.root, self.counter)

    def view(self, blocks: list[Any], p: Perception, budget: int,
             ) -> tuple[Selection, BuiltContext]:
        """Select and build the same blocks with a new scorer, selector and builder."""
        compressor = MemoryCompressor(counter=self.counter)
        scorer = RelevanceScorer(now=clock)
        scorer.set_task(" ".join(
            [r.task.title + " " + r.task.body[:500] for r in p.active.values()]
            + [m.message.subject for m in p.unread]
        ))
        selector = MemorySelector(self.loader, self.counter, scorer,
                                  compressor.max_block_tokens, stat_ttl=0.0)
        selection = selector.select(blocks, budget)
        builder = ContextBuilder(self.loader, self.counter, compressor)
        return selection, asyncio.run(builder.build(selection, budget))


def perceived(working: WorkingMemoryManager) -> list[tuple[str, str, dict[str, Any]]]:
    rows = []
    for block in working.blocks():
        fields = block.model_dump()
        if block.type in STAMPED:
            del fields["timestamp"]
        if block.type is BlockType.MESSAGE:
            del fields["expiry"]  # read mail: perception time + READ_MAIL_TTL
        rows.append((block.type.value, block.id, fields))
    return rows


def selection_facts(sel: Selection) -> dict[str, Any]:
    return {
        "kept": [b.id for b in sel.kept],
        "dropped": [(d.block.id, d.reason, d.tokens) for d in sel.dropped],
        "tokens": sel.tokens,
        "scores": sel.scores,
        "used": sel.used,
        "budget": sel.budget,
    }


def built_facts(built: BuiltContext) -> dict[str, Any]:
    return {
        "json": built.to_json(),
        "parts": built.json_parts(),
        "entries": built.entries,
        "stable_count": built.stable_count,
        "tokens": built.tokens,
        "token_counts": built.token_counts,
        "notes": built.notes,
        "dropped": [(d.block.id, d.reason, d.tokens) for d in built.dropped],
    }


def step(hive: Hive, agent: CachedAgent, shadow: Shadow, budget: int = 60_000) -> ContextView:
    """One perceive + view with the caches, checked against the same step without them."""
    before = agent.working.blocks()
    p = agent.perceive()
    assert perceived(agent.working) == perceived(fresh_perceive(hive, agent, before))
    blocks = agent.working.blocks()
    view = agent.view(p, budget)
    selection, built = shadow.view(blocks, p, budget)
    assert selection_facts(view.selection) == selection_facts(selection)
    assert built_facts(view.built) == built_facts(built)
    return view


def claim(hive: Hive, board: TaskBoard, stem: str, body: str) -> TaskRef:
    write_task(hive, stem, body)
    ref = next(r for r in board.scan_pending() if r.path.stem == stem)
    claimed = board.claim(ref, AGENT)
    assert claimed is not None
    return claimed


def edit(path: Path, text: str, age: float = 10.0) -> None:
    """Write `text` with an mtime `age` seconds ago (outside the racy window)."""
    path.write_text(text)
    when = time.time() - age
    os.utime(path, (when, when))


def make_hive(hive: Hive) -> CachedAgent:
    write_agent(hive, AGENT, body="You are the worker. Summarise what you are given.\n")
    (hive.knowledge_dir / "python").mkdir()
    edit(hive.knowledge_dir / "style.md", "# Style\n\nBe brief.\n" * 10)
    edit(hive.knowledge_dir / "python" / "typing.md", "# Typing\n\nAnnotate.\n")
    edit(hive.workspace_dir / "notes.md", "Bees: 3 hives.\n")
    agent = CachedAgent(hive)
    for stem in ("alpha", "beta"):
        claim(hive, agent.services.board, stem, f"Summarise the {stem} report about bees.")
    # A file kept in view (read_file leaves one): the same block while its file changes.
    agent.working.add(FileBlock(location="workspace/notes.md", priority=Priority.HIGH))
    return agent


def changes(hive: Hive, agent: CachedAgent) -> list[tuple[str, Callable[[], object]]]:
    """What happens between two cycles: on disk, in working memory, in the figures."""
    board = agent.services.board
    style = hive.knowledge_dir / "style.md"

    def finish_alpha() -> None:
        board.complete(next(r for r in board.active(AGENT) if r.id == "alpha"), "done", AGENT)

    def history() -> None:
        agent.working.add(HistoryBlock(action="write_file", detail="notes.md", result="ok",
                                       priority=Priority.MEDIUM))
        summary("- alpha")

    def summary(lines: str) -> None:
        agent.working.add(ContextBlock(
            id="context:finished", context_type="finished", priority=Priority.LOW,
            summary=f"Tasks you finished recently:\n{lines}",
        ))

    def reprioritise() -> None:
        history = agent.working.by_type(BlockType.HISTORY)[0]
        history.priority = Priority.LOW  # assignments: the same object, new field values
        history.confidence = 0.2

    def summary_later() -> None:
        old = agent.working.get("context:finished")
        assert isinstance(old, ContextBlock)
        agent.working.add(old.model_copy(update={"timestamp": old.timestamp + timedelta(
            seconds=3)}))  # only the time differs, and it renders differently

    def flags(**fields: Any) -> None:
        agent.working.add(ContextBlock(id="context:flags", context_type="flags",
                                       summary="Flags.", timestamp=NOW, **fields))

    def mail(subject: str) -> None:
        agent.services.post.send("human", AGENT, subject, f"About {subject}: count the bees.")

    def read_all() -> None:
        for item in agent.agent.mailbox.unread():
            agent.agent.mailbox.mark_read(item)

    def task_file() -> None:
        path = next(r.path for r in board.active(AGENT) if r.id == "beta")
        edit(path, "---\nid: beta\n---\n# beta\n\nSummarise the beta report, twice.\n" * 3)

    return [
        ("nothing", lambda: None),
        ("a note edited", lambda: edit(style, "# House style\n\nBe brief and kind.\n" * 10)),
        ("a note touched", lambda: os.utime(style, (time.time() - 5, time.time() - 5))),
        ("a note deleted", (hive.knowledge_dir / "python" / "typing.md").unlink),
        ("a task added", lambda: claim(hive, board, "gamma", "Count the bees of gamma.")),
        ("a task finished", finish_alpha),
        ("the ROM edited", lambda: edit(
            hive.rom_path(AGENT), "---\nrole: counter\n---\nYou count bees. Be exact.\n")),
        ("history and a summary", history),
        ("the summary replaced", lambda: summary("- alpha\n- delta")),
        ("a confidence changed", lambda: agent.working.update_confidence(style.name, 0.3)
         or agent.working.update_confidence("knowledge/style.md", 0.3)),
        ("the figures changed", lambda: agent.figures.update({"tasks": {"pending": 2}})),
        ("a task file edited", task_file),
        ("mail arrives", lambda: mail("bees")),
        ("more mail", lambda: mail("hives")),
        ("the mail is read", read_all),
        ("read mail and new mail", lambda: mail("queens")),
        ("a file in view edited", lambda: edit(
            hive.workspace_dir / "notes.md", "Bees: 4 hives, one new.\n")),
        ("history re-prioritised", reprioritise),
        ("a summary made again later", summary_later),
        ("flags", lambda: flags(metadata={"n": 1, "x": 0.5}, confidence=0.0)),
        ("1 becomes True", lambda: flags(metadata={"n": True, "x": 0.5}, confidence=0.0)),
        ("0.5 becomes 1", lambda: flags(metadata={"n": True, "x": 1}, confidence=0.0)),
        ("1 becomes 1.0", lambda: flags(metadata={"n": True, "x": 1.0}, confidence=0.0)),
        ("0.0 becomes -0.0", lambda: flags(metadata={"n": True, "x": 1.0}, confidence=-0.0)),
        ("keys reordered", lambda: flags(metadata={"x": 1.0, "n": True}, confidence=-0.0)),
    ]


def test_every_change_gives_the_context_a_fresh_build_gives(hive: Hive) -> None:
    agent, shadow = make_hive(hive), Shadow(hive)
    for what, change in changes(hive, agent):
        change()
        try:
            step(hive, agent, shadow)
            step(hive, agent, shadow)  # and again with nothing new: all from the caches
        except AssertionError as exc:
            raise AssertionError(f"after {what}: {exc}") from exc


def test_tight_budgets_drop_the_same_blocks_for_the_same_reasons(hive: Hive) -> None:
    agent, shadow = make_hive(hive), Shadow(hive)
    for i in range(12):
        agent.working.add(HistoryBlock(action="write_file", detail=f"part {i} " * 40,
                                       result="ok " * 30, priority=Priority.MEDIUM))
    total = step(hive, agent, shadow).built.tokens
    dropped = 0
    for budget in (total, total - 300, total // 2, total // 3, total // 2, total):
        view = step(hive, agent, shadow, budget)
        dropped += len(view.selection.dropped) + len(view.built.dropped)
    assert dropped  # the budgets did bite
