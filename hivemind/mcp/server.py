"""One server over its life: started, restarted after a crash with back-off, failed
when it keeps crashing (and tried once again now and then), stopped. Its calls turn
every problem into an error result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from hivemind.clock import utcnow
from hivemind.mcp.api import McpResult, McpTool, ServerState, ServerStatus
from hivemind.mcp.connection import CallTimedOut, Connection, ConnectionLost
from hivemind.mcp.launch import (
    HttpTarget,
    LaunchProblem,
    check_files,
    http_target,
    stdio_parameters,
)
from hivemind.mcp.names import safe_names
from hivemind.mcp.results import bounded, to_result
from hivemind.mcp.serverlog import ServerLog
from hivemind.mcp.vetting import vet_tools
from hivemind.mcpspec import McpServerSpec
from hivemind.printable import printable

logger = logging.getLogger(__name__)
ERROR_CHARS = 2_000  # an error of ours quoting the server is cut past this
_SETTLED = (ServerStatus.READY, ServerStatus.FAILED, ServerStatus.STOPPED)


@dataclass(frozen=True)
class RestartPolicy:
    """When a crashed server is started again, and when it is given up on."""

    first_delay: float = 1.0  # then 2, 4, 8 … seconds
    max_delay: float = 60.0
    crashes: int = 5  # this many in `window` seconds: failed
    window: float = 300.0
    start_timeout: float = 30.0  # to start and list its tools (or its `timeout`, if longer)
    ping: float = 5.0  # after a call timed out: a server silent this long is stuck
    retry_failed: float = 600.0  # a failed server is tried again after this long


class ManagedServer:
    """A server the pool runs (stdio) or connects to (HTTP), shared by its agents."""

    def __init__(self, name: str, spec: McpServerSpec, *, hive_root: Path,
                 environ: Mapping[str, str], log: ServerLog, policy: RestartPolicy,
                 files: Mapping[str, str] | None = None) -> None:
        """`files`: the digests of the hive files it runs, as trusted (None: unchecked);
        each start checks them, so a script changed since is never run."""
        self.name = name
        self.spec = spec
        self.files = files
        self.hive_root = hive_root
        self.environ = environ
        self.log = log
        self.policy = policy
        self.status = ServerStatus.STARTING
        self.error: str | None = None
        self.restarts = 0
        self.tools: list[McpTool] = []
        self._list_problem: str | None = None  # what of its tool list was left out
        self._own: dict[str, str] = {}  # a tool's name as offered → the server's, if not
        """What it offers, by name (all of it: each agent's allow-list applies later)."""
        self._conn: Connection | None = None
        self._crashes: deque[float] = deque()
        self._retrying = False  # it failed: the next start is one try
        self._settled = asyncio.Event()
        self._wake = asyncio.Event()
        self._stopping = False
        self._cut: tuple[Connection, str, bool] | None = None
        """A session to end and start again: it, why, whether to back off first."""
        self._task: asyncio.Task[None] | None = None

    @property
    def start_timeout(self) -> float:
        """How long it may take to start: a slow starter (`npx` fetching its package)
        is given its call `timeout` when that is longer than the policy's."""
        return max(self.policy.start_timeout, self.spec.timeout)

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.name}-supervisor")

    async def settled(self, within: float) -> None:
        """Wait until it is ready, failed or stopped (at most `within` seconds)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await self._settled.wait()

    def state(self, agents: tuple[str, ...]) -> ServerState:
        conn = self._conn
        pid = conn.pid if conn is not None and self.status == ServerStatus.READY else None
        return ServerState(self.name, self.status, self.spec.transport, len(self.tools),
                           agents, pid=pid, restarts=self.restarts,
                           error=printable(self.error, one_line=True) if self.error else None)

    async def call(self, tool: str, arguments: dict[str, Any], *, limit: float,
                   max_chars: int) -> McpResult:
        """Call `tool` (`limit`: seconds it may take); the server's problems come back
        as an error result."""
        self._notice_end()
        if self.status not in _SETTLED:  # (re)starting: as long as a start may take
            await self.settled(self.start_timeout)
        conn = self._conn
        if self.status != ServerStatus.READY or conn is None:
            return _error(self._unavailable())
        own = self.own_name(tool)
        if own not in {t.name for t in conn.tools}:
            offered = ", ".join(t.name for t in self.tools) or "none"
            return _error(f"the server `{self.name}` has no tool `{tool}` (it offers: {offered})")
        try:
            raw = await conn.call(own, arguments, limit)
        except CallTimedOut:
            said = f"`{self.name}.{tool}` timed out after {limit:g} s"
            if await conn.answers(self.policy.ping):
                return _error(said)
            self._restart(conn, "it did not answer after a call timed out", back_off=False)
            return _error(f"{said}; the server does not answer at all, so it is restarted")
        except ConnectionLost as e:
            if not conn.ended.is_set():  # an HTTP session whose endpoint went away
                self._restart(conn, f"its connection failed: {e}", back_off=True)
            self._notice_end()
            return _error(f"the server `{self.name}` {conn.how_it_ended()} during the call: "
                          f"{e}")
        except MCPError as e:
            return _error(f"the server `{self.name}` refused the call: {e.error.message}")
        except Exception as e:  # an answer the SDK cannot read, say
            return _error(f"the server `{self.name}` answered the call wrongly: "
                          f"{type(e).__name__}: {e}")
        return to_result(raw, max_chars)

    async def stop(self, grace: float) -> None:
        """Stop it: its session ends cleanly, else it is killed after `grace` seconds."""
        self._stopping = True
        self._wake.set()
        conn, task = self._conn, self._task
        if conn is not None:
            await conn.stop(grace)
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(grace + 5.0):
                    await asyncio.shield(task)
            if not task.done():
                task.cancel()
        self.log.note("stopped")
        self._set(ServerStatus.STOPPED)

    def _unavailable(self) -> str:
        if self.status == ServerStatus.FAILED:
            return f"the server `{self.name}` has failed: {self.error}"
        if self.status == ServerStatus.STOPPED:
            return f"the server `{self.name}` is stopped"
        why = f" after: {self.error}" if self.error else ""
        return f"the server `{self.name}` is not ready yet ({self.status.value}{why})"

    def own_name(self, tool: str) -> str:
        """The server's own name for the tool a model calls `tool` (see `names`)."""
        return self._own.get(tool, tool)

    def _offered(self, tools: list[types.Tool]) -> None:
        """What the server offers now (at its start, and when it says it changed)."""
        own = safe_names(self.name, (t.name for t in tools))
        by_name = {t.name: t for t in tools}
        self._own = {safe: name for safe, name in own.items() if safe != name}
        offered = [McpTool(self.name, safe, by_name[name].description or "",
                           dict(by_name[name].input_schema)) for safe, name in own.items()]
        self.tools, problem = vet_tools(offered)
        if problem is not None:  # what status says of it, until its list is fine
            if problem != self.error:
                self.log.note(problem)
            self.error = problem
        elif self.error is not None and self.error == self._list_problem:
            self.error = None
        self._list_problem = problem
        for safe, name in self._own.items():
            self.log.note(f"its tool {name!r} is offered as {safe!r}: a model takes no "
                          "other characters than letters, digits, _ and -, and 64 at most")

    def _notice_end(self) -> None:
        """A session that ended is no longer ready, before the supervisor wakes to it."""
        conn = self._conn
        if self.status == ServerStatus.READY and conn is not None and conn.ended.is_set():
            self._set(ServerStatus.RESTARTING)

    def _restart(self, conn: Connection, why: str, *, back_off: bool) -> None:
        """Have the supervisor restart a stuck or broken server (once, whoever asks)."""
        if conn is self._conn and self._cut is None:
            self._cut = (conn, why, back_off)
            self._set(ServerStatus.RESTARTING)  # later calls wait for the new one
            self._wake.set()

    def _set(self, status: ServerStatus) -> None:
        self.status = status
        if status in _SETTLED:
            self._settled.set()
        else:
            self._settled.clear()

    async def _supervise(self) -> None:
        try:
            while not self._stopping:
                if self._conn is not None:
                    self.restarts += 1
                self._wake.clear()
                launch = await self._launch()
                if launch is None:
                    return
                conn = Connection(self.name, launch, self.log, on_tools=self._offered)
                self._conn = conn
                try:
                    await conn.open(self.start_timeout)
                except ConnectionLost as e:
                    why = f"{conn.how_it_ended()} while starting: {e}" if conn.exited else str(e)
                    if self._stopping or not await self._crashed(why):
                        return
                    continue
                self._offered(conn.tools)
                self.log.note(f"ready: {len(self.tools)} tools, pid {conn.pid}")
                self._retrying = False
                self._set(ServerStatus.READY)
                await _first(conn.ended, self._wake)
                if self._stopping:
                    return
                back_off = True
                if self._cut is not None and self._cut[0] is conn:
                    _, why, back_off = self._cut  # a stuck one starts again at once
                    self._cut = None
                    await conn.stop(0.0)
                else:
                    why = (f"{conn.how_it_ended()}: {conn.end_reason}" if conn.exited
                           else f"{conn.end_reason}")
                if not await self._crashed(why, back_off=back_off):
                    return
        except Exception as e:  # a bug of ours: the server is given up, the daemon goes on
            logger.exception("MCP server %s: its supervisor failed", self.name)
            self.error = f"hivemind could not run it: {type(e).__name__}: {e}"
            self._set(ServerStatus.FAILED)
        finally:
            if self._stopping:
                self._set(ServerStatus.STOPPED)

    async def _launch(self) -> StdioServerParameters | HttpTarget | None:
        """How to start or reach it now; None (and failed) if the ROM's settings cannot
        work."""
        try:
            launch: StdioServerParameters | HttpTarget
            if self.spec.url is not None:
                launch = http_target(self.spec, self.environ)
                self.log.note(f"connecting to {launch.url}")
            else:
                if self.files is not None:  # hashed off the loop: a script may be large
                    await asyncio.to_thread(check_files, self.spec, self.hive_root,
                                            self.files)
                launch = stdio_parameters(self.spec, self.hive_root, self.environ)
                self.log.note(f"starting {self.spec.command} {' '.join(self.spec.args)}")
        except LaunchProblem as e:
            self.error = str(e)
            self._set(ServerStatus.FAILED)
            return None
        return launch

    async def _crashed(self, why: str, *, back_off: bool = True) -> bool:
        """Count a crash, then wait: out the back-off, or, once it crashed too often
        (failed), until it is tried again. False: it is being stopped."""
        self.log.note(why)
        now = time.monotonic()
        self._crashes.append(now)
        while self._crashes and self._crashes[0] < now - self.policy.window:
            self._crashes.popleft()
        n = len(self._crashes)
        if n >= self.policy.crashes or self._retrying:
            often = ("still" if self._retrying
                     else f"{n} crash{'es' if n > 1 else ''} in {self.policy.window:g} s")
            self._retrying = True  # one try then: it fails again at its first crash
            self._crashes.clear()
            delay = self.policy.retry_failed
            at = (utcnow() + timedelta(seconds=delay)).strftime("%H:%M UTC")
            self.error = f"{why} ({often}; tried again at {at}, or when its settings change)"
            self._set(ServerStatus.FAILED)
        else:
            self.error = why
            self._set(ServerStatus.RESTARTING)
            delay = min(self.policy.max_delay, self.policy.first_delay * 2 ** (n - 1))
            if not back_off:
                delay = 0.0
        if self._stopping or delay <= 0:
            return not self._stopping
        self._wake.clear()  # (a stop asked before this point was seen just above)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._wake.wait()
        return not self._stopping


async def _first(*events: asyncio.Event) -> None:
    """Wait until one of `events` is set."""
    waits = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _error(text: str) -> McpResult:
    """An error result of ours, bounded (it may quote what the server said)."""
    return bounded(iter([text]), ERROR_CHARS, is_error=True)

