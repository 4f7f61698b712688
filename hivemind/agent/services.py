"""The objects every agent of one hive shares (board, post office, caches, provider)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hivemind.agent.prompt import TEAM, FixedTokens
from hivemind.errors import HivemindError
from hivemind.hive.config import load_hive_config
from hivemind.hive.knowledge import KnowledgeIndex
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.rom import RomRegistry
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.base import Provider
from hivemind.memory.builder import ContextBuilder
from hivemind.memory.compressor import MemoryCompressor
from hivemind.memory.janitor import MemoryJanitor
from hivemind.memory.loader import ContentLoader
from hivemind.memory.tokens import TokenCounter
from hivemind.settings import HiveConfig
from hivemind.tools import default_registry
from hivemind.tools.base import ToolRegistry

if TYPE_CHECKING:
    from hivemind.ltm.store import LongTermMemory


HISTORY_KEPT = 24
"""History blocks an agent keeps (finished tasks' steps are compacted, see the cycle)."""
FIGURES_TTL = 2.0
"""Seconds hive figures (tasks per state) in STATUS blocks stay cached when no task moved."""


def _noop(*_args: Any) -> None:
    return None


@dataclass
class HiveServices:
    """Shared, long-lived parts of a running hive; agents borrow them per cycle."""

    hive: Hive
    config: HiveConfig
    provider: Provider
    board: TaskBoard
    post: PostOffice
    roms: RomRegistry
    knowledge: KnowledgeIndex
    tools: ToolRegistry
    counter: TokenCounter
    loader: ContentLoader
    compressor: MemoryCompressor
    builder: ContextBuilder
    janitor: MemoryJanitor
    model_slots: asyncio.Semaphore
    ltm: LongTermMemory | None = None
    secrets: tuple[str, ...] = ()
    figures: Callable[[], dict[str, Any]] = dict
    task_changed: Callable[[], None] = _noop
    mail_sent: Callable[[list[str]], None] = _noop
    fixed_tokens: FixedTokens = field(init=False, repr=False)
    """Tokens of what every request carries besides the context: preamble + tools."""

    def __post_init__(self) -> None:
        self.fixed_tokens = FixedTokens(self.tools, self.counter)
        # A ROM whose token settings leave no room once these are counted is told.
        self.roms.fixed_tokens = self.fixed_tokens

    @classmethod
    def open(
        cls, hive: Hive, provider: Provider, config: HiveConfig | None = None,
        secrets: tuple[str, ...] = (),
    ) -> HiveServices:
        """Wire the services of `hive` (reads hive.toml unless `config` is given)."""
        cfg = config or load_hive_config(hive)
        counter = TokenCounter()
        loader = ContentLoader(hive.root, counter)
        compressor = MemoryCompressor(counter=counter)
        return cls(
            hive=hive,
            config=cfg,
            provider=provider,
            board=TaskBoard(hive, settle_time=cfg.daemon.settle_time, fsync=cfg.daemon.fsync),
            post=PostOffice(hive, fsync=cfg.daemon.fsync),
            roms=RomRegistry(hive, cfg.agents, settle_time=cfg.daemon.settle_time,
                             models=cfg.models),
            knowledge=KnowledgeIndex(hive),
            tools=default_registry(),
            counter=counter,
            loader=loader,
            compressor=compressor,
            builder=ContextBuilder(loader, counter, compressor),
            janitor=MemoryJanitor(history_capacity=HISTORY_KEPT),
            model_slots=asyncio.Semaphore(cfg.daemon.max_concurrent_calls),
            secrets=secrets,
        )

    def board_figures(self) -> dict[str, Any]:
        """Hive figures: tasks per state (an agent's STATUS block) and the team, each
        agent with its role (the system prompt: it changes only when the team does)."""
        counts = self.board.counts()
        team = []
        for name in self.hive.agent_names():
            try:
                role = self.roms.load(name).summary
            except HivemindError:
                role = ""
            team.append([name, role])
        return {"tasks": {k.value: v for k, v in counts.items()}, TEAM: team}



class HiveFigures:
    """The hive figures for STATUS blocks, recomputed at most every `ttl` seconds; after
    a task move it is told of (`moved`) the task counts are taken again at once (the
    counts an agent sees include the claim made for it just now), the team (a ROM read
    per agent) keeps its ttl."""

    def __init__(self, services: HiveServices, ttl: float = FIGURES_TTL) -> None:
        self.services = services
        self.ttl = ttl
        self._at = -math.inf
        self._moved = False
        self._figures: dict[str, Any] = {}

    def __call__(self) -> dict[str, Any]:
        now = time.monotonic()
        if now - self._at > self.ttl:
            self._figures, self._at, self._moved = self.services.board_figures(), now, False
        elif self._moved:  # the counts again; the team (ROMs read) keeps its ttl
            tasks = {k.value: v for k, v in self.services.board.counts().items()}
            self._figures, self._moved = {**self._figures, "tasks": tasks}, False
        return self._figures

    def moved(self, *_move: object) -> None:
        """A task moved (a claim, an end, a release: any `on_load_change`)."""
        self._moved = True
