"""Tool plumbing: a tool is a pydantic input model plus an async function.

A tool the model calls badly (unknown name, invalid input, refused path, a
`ToolError`, a path the filesystem refuses) returns an `is_error` result the
model can act on; it never ends the cycle. Anything else raised by a tool is a
bug and propagates.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from hivemind.errors import FileFormatError, PathEscapeError, StoreError, ToolError, UserError
from hivemind.fs.diskspace import full_error, is_full
from hivemind.hive.layout import Hive
from hivemind.llm.base import ToolCall, ToolResult, ToolSpec
from hivemind.mcpspec import split_tool_name
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools.schema import compact_schema

if TYPE_CHECKING:
    from hivemind.hive.mailbox import PostOffice
    from hivemind.hive.tasks.board import TaskBoard
    from hivemind.hive.tasks.ref import TaskRef
    from hivemind.ltm.store import LongTermMemory
    from hivemind.tools.limits import Conversations
    from hivemind.tools.mcp import McpToolbox

logger = logging.getLogger(__name__)

InputT = TypeVar("InputT", bound=BaseModel)

MAX_RESULT_CHARS = 20_000
"""Tool results longer than this are cut (the model can ask for a narrower range)."""


@dataclass
class CycleEffects:
    """What the tools of one cycle changed; the cycle reports and audits it."""

    messages_sent: list[str] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)
    tasks_created: list[str] = field(default_factory=list)
    tasks_completed: list[str] = field(default_factory=list)
    tasks_failed: list[str] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)
    internal_error: str | None = None  # a tool's bug, for status (the audit has the call)
    waits: dict[str, str] = field(default_factory=dict)  # task id → what it waits for
    refusals: list[str] = field(default_factory=list)  # calls a loop limit refused
    delegated: dict[str, str] = field(default_factory=dict)  # task created → held parent


@dataclass
class ToolContext:
    """Everything a tool may touch on behalf of one agent in one cycle."""

    hive: Hive
    agent: str
    config: AgentConfig
    board: TaskBoard
    post: PostOffice
    working: WorkingMemoryManager
    active_tasks: dict[str, TaskRef]
    effects: CycleEffects = field(default_factory=CycleEffects)
    ltm: LongTermMemory | None = None
    on_mail: Callable[[list[str]], None] | None = None
    on_task_change: Callable[[], None] | None = None
    conversations: Conversations | None = None  # the agent's, for the thread limit

    def refuse(self, why: str) -> ToolError:
        """A loop limit's refusal: kept for the audit record and status, then raised."""
        self.effects.refusals.append(why)
        if self.conversations is not None:
            return self.conversations.refuse(why)
        return ToolError(why)

    def current_task(self) -> TaskRef | None:
        """The task this cycle works on, when there is exactly one obvious one."""
        return next(iter(self.active_tasks.values()), None)


ANY = "*"


@dataclass(frozen=True)
class Footprint:
    """What a call reads and writes, by name: "files" (workspace/ and knowledge/),
    "mail", "tasks" (the board and the cycle's held tasks), "task:<id>", "memory";
    "*" is everything. Calls of one round whose footprints do not conflict run
    overlapped and share one disk flush (see the cycle); the rest wait their turn."""

    reads: frozenset[str] = frozenset({ANY})
    writes: frozenset[str] = frozenset({ANY})

    @staticmethod
    def of(reads: Iterable[str] = (), writes: Iterable[str] = ()) -> Footprint:
        return Footprint(frozenset(reads), frozenset(writes))

    def union(self, other: Footprint) -> Footprint:
        """What two calls touch together: a call is `after` the union exactly when it
        is `after` one of them."""
        return Footprint(self.reads | other.reads, self.writes | other.writes)

    def after(self, earlier: Footprint) -> bool:
        """True if this call must wait until `earlier` (a call before it) has finished:
        it reads what that one writes, or writes what that one reads. Two blind writes
        do not conflict: their effects land in call order either way."""
        return _overlap(self.reads, earlier.writes) or _overlap(self.writes, earlier.reads)


def _overlap(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return False
    return ANY in a or ANY in b or not a.isdisjoint(b)


EXCLUSIVE = Footprint()
"""A tool that says nothing of its footprint runs alone."""


@dataclass
class Tool(Generic[InputT]):
    """One tool: name, description, input model, the coroutine that runs it, and what
    its calls touch (one footprint for every call, or one from a call's raw input;
    None: everything)."""

    name: str
    description: str
    input_model: type[InputT]
    run: Callable[[ToolContext, InputT], Awaitable[str]]
    touches: Footprint | Callable[[dict[str, Any]], Footprint] | None = None
    _spec: ToolSpec | None = field(default=None, init=False, repr=False, compare=False)

    def spec(self) -> ToolSpec:
        """The definition sent to the model (built once: schema generation is slow)."""
        if self._spec is None:
            schema = compact_schema(self.input_model.model_json_schema())
            self._spec = ToolSpec(name=self.name, description=self.description,
                                  input_schema=schema)
        return self._spec


class ToolRegistry:
    """The tools an agent can be given; ROM `tools:` is an allow-list over them."""

    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            self.register(tool)
        self.mcp: McpToolbox | None = None
        """MCP servers' tools, after the built-in ones (set where a pool runs them)."""

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def allowed(self, allow: list[str] | None) -> list[Tool[Any]]:
        """The tools an agent may use (all when `allow` is None), in registry order."""
        if allow is None:
            return list(self._tools.values())
        wanted = set(allow)
        return [t for name, t in self._tools.items() if name in wanted]

    def specs(self, allow: list[str] | None, agent: str | None = None) -> list[ToolSpec]:
        """The definitions the model is sent: the built-in tools `allow` allows, then
        (given the `agent`) its MCP servers' tools."""
        builtin = [t.spec() for t in self.allowed(allow)]
        if agent is None or self.mcp is None:
            return builtin
        return builtin + self.mcp.specs(agent, allow)

    def footprint(self, call: ToolCall) -> Footprint:
        """What `call` reads and writes; an unknown tool touches nothing (it only errs).
        An MCP server's tool may touch anything: it runs alone."""
        tool = self._tools.get(call.name)
        if tool is None:
            if self.mcp is not None and split_tool_name(call.name) is not None:
                return EXCLUSIVE
            return Footprint.of()
        if tool.touches is None:
            return EXCLUSIVE
        if isinstance(tool.touches, Footprint):
            return tool.touches
        try:
            return tool.touches(call.input)
        except Exception:  # input too malformed to tell: let it run alone
            return EXCLUSIVE

    async def execute(self, ctx: ToolContext, call: ToolCall) -> ToolResult:
        """Run one call; a mistake of the model comes back as an error result."""
        tool = self._tools.get(call.name)
        if tool is None and self.mcp is not None and split_tool_name(call.name) is not None:
            return await self.mcp.execute(ctx.agent, ctx.config, call)
        permitted = ctx.config.tools is None or call.name in ctx.config.tools
        if tool is None or not permitted:
            known = ", ".join(t.name for t in self.allowed(ctx.config.tools))
            return _error(call, f"unknown tool {call.name!r}; available: {known}")
        if call.input_error is not None:
            return _error(call, f"invalid input for {call.name}: {call.input_error}")
        try:
            args = tool.input_model.model_validate(call.input)
        except ValidationError as exc:
            return _error(call, f"invalid input for {call.name}: {_first_errors(exc)}")
        try:
            content = await tool.run(ctx, args)
        except (ToolError, PathEscapeError, FileFormatError, UserError) as exc:
            return _error(call, str(exc))
        except (OSError, StoreError) as exc:
            if is_full(exc):  # no mistake of the model's: the cycle stops, the hive waits
                raise full_error(exc, ctx.hive.root) from exc
            if isinstance(exc, StoreError):
                raise
            # The filesystem refused what the model asked for (a folder that is a file, a
            # name too long, a file gone): its mistake to see, not a reason to stop.
            return _error(call, _os_problem(ctx.hive, exc))
        except Exception as exc:  # a bug here: the cycle goes on, and it is told
            logger.exception("%s: internal error in tool %s", ctx.agent, call.name)
            ctx.effects.internal_error = f"internal error in {call.name}: {_bug(exc)}"
            return _error(call, f"{ctx.effects.internal_error} (a fault of the runtime, not "
                                "of your call; it is recorded: try another way)")
        if len(content) > MAX_RESULT_CHARS:
            cut = len(content) - MAX_RESULT_CHARS
            content = content[:MAX_RESULT_CHARS] + f"\n[... {cut} more characters cut]"
        return ToolResult(tool_use_id=call.id, content=content)


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(tool_use_id=call.id, content=message, is_error=True)


def _bug(exc: Exception) -> str:
    """An unexpected exception in one line: its type and the start of its message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _os_problem(hive: Hive, exc: OSError) -> str:
    where = hive.relative(Path(os.fsdecode(exc.filename))) if exc.filename else "file"
    return f"{where}: {exc.strerror or exc}"


def _first_errors(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "input"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def canonical_call(call: ToolCall) -> str:
    """A stable text for a call (name + sorted input), for the loop breaker."""
    return call.name + json.dumps(call.input, sort_keys=True, default=str)


def hive_relative(hive: Hive, path: Path) -> str:
    return hive.relative(path)
