"""One session with one MCP server (one process, for stdio) in a task of its own.

The SDK's transports and `ClientSession` are entered and left in that task (anyio
wants it so); agents' calls come from their own tasks and only send requests. The
session ends when the server exits (its stdout closes), when the HTTP transport fails,
or when it is stopped; `end_reason` then says why in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TextIO, cast

import anyio
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._stream_protocols import ReadStream
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from hivemind.mcp.launch import HttpTarget
from hivemind.mcp.serverlog import CURRENT, ServerLog, StderrPipe

CLIENT = types.Implementation(name="hivemind", version="0.1")
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
RELIST_EVERY = 1.0  # seconds between two listings of a server's tools
_EXIT_SEEN = 2.0  # how long to wait for an exited server's last stderr lines


class ConnectionLost(Exception):
    """The session ended (the server exited, the endpoint failed); str: why."""


class CallTimedOut(Exception):
    """The server did not answer a call within its time limit."""


class Connection:
    """A live session: `open` it, `call` its tools, `stop` it."""

    def __init__(self, name: str, launch: StdioServerParameters | HttpTarget,
                 log: ServerLog,
                 on_tools: Callable[[list[types.Tool]], None] | None = None) -> None:
        """`on_tools` hears of the tools the server offers when it says they changed."""
        self.name = name
        self.launch = launch
        self.log = log
        self.on_tools = on_tools
        self._relisting: asyncio.Task[None] | None = None
        self.tools: list[types.Tool] = []
        self.ready = asyncio.Event()
        self.ended = asyncio.Event()
        self.exited = False
        """It ended because the server's process exited (stdio)."""
        self.exit_code: int | None = None
        """Then, its exit code if known (negative: the signal that killed it)."""
        self.end_reason: str | None = None
        """Why it ended, one line: what an exited server printed last, the HTTP error."""
        self._session: ClientSession | None = None
        self._pipe: StderrPipe | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._lost = False
        self._ending = False
        self._cut_short: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._first_line = 0

    @property
    def pid(self) -> int | None:
        return self._pipe.pid if self._pipe is not None else None

    async def open(self, start_timeout: float) -> None:
        """Start the server and wait until its tools are listed; ConnectionLost if not."""
        self._task = asyncio.create_task(self._run(start_timeout), name=f"mcp-{self.name}")
        ready = asyncio.create_task(self.ready.wait())
        ended = asyncio.create_task(self.ended.wait())
        try:
            await asyncio.wait({ready, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            ended.cancel()
        if not self.ready.is_set():
            raise ConnectionLost(self.end_reason or "it ended before it was ready")

    async def call(self, tool: str, arguments: dict[str, Any],
                   seconds: float) -> types.CallToolResult:
        """Call one tool. CallTimedOut, ConnectionLost; MCPError for a protocol error
        the server answered with (bad arguments, say)."""
        session = self._session
        if session is None or self.ended.is_set():
            raise ConnectionLost(self.end_reason or "it is not running")
        said = "the connection closed"
        try:
            return await session.call_tool(tool, arguments, read_timeout_seconds=seconds)
        except MCPError as e:
            if e.code == types.REQUEST_TIMEOUT:
                raise CallTimedOut from e
            if e.code != types.CONNECTION_CLOSED:
                raise
            said = e.error.message
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        if self._pipe is not None:  # a stdio server that exited: its session ends soon
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_EXIT_SEEN * 2):
                    await self.ended.wait()
        raise ConnectionLost(self.end_reason or said)

    async def answers(self, within: float) -> bool:
        """Whether the server answers a ping within `within` seconds."""
        session = self._session
        if session is None or self.ended.is_set():
            return False
        try:
            async with asyncio.timeout(within):
                await session.send_ping()
        except (TimeoutError, MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def stop(self, grace: float) -> None:
        """End the session: stdin closed (the SDK then waits, terminates, kills); after
        `grace` seconds the process group is killed and the task cancelled."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is None or task.done():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await asyncio.shield(task)
        if task.done():
            return
        self.kill()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            async with asyncio.timeout(5.0):
                await task

    def kill(self) -> None:
        """SIGKILL the server's process group (it has one of its own), if it runs."""
        pipe = self._pipe
        if pipe is not None and not pipe.ended.is_set():  # else nothing of it is left
            self._kill_group(pipe)

    @staticmethod
    def _kill_group(pipe: StderrPipe) -> None:
        group = pipe.group or pipe.pid
        if group is not None:
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)

    async def _run(self, start_timeout: float) -> None:
        CURRENT.set(self.log)  # this task's own context, and that of the SDK's under it
        try:
            async with AsyncExitStack() as stack:
                try:
                    await self._serve(stack, start_timeout)
                finally:
                    self._ending = True  # what befalls the server from here is our doing
            self.end_reason = await self._why(None)
        except Exception as e:  # every way a server fails ends here
            self.end_reason = await self._why(_one_line(e))
        finally:
            self._session = None
            self.ended.set()

    async def _serve(self, stack: AsyncExitStack, start_timeout: float) -> None:
        """Open the session in `stack`, list the tools, then hold it until it ends."""
        read, write = await stack.enter_async_context(self._transport())
        sink, source = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        relay = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(relay.cancel_scope.cancel)  # before the group's exit
        relay.start_soon(self._relay, read, sink)
        session = await stack.enter_async_context(ClientSession(
            source, write, client_info=CLIENT, message_handler=self._heard,
            logging_callback=self._logged))
        try:
            with anyio.fail_after(start_timeout):
                await session.initialize()
                self.tools = await _all_tools(session)
        except TimeoutError:
            self._cut_short = f"it did not start within {start_timeout:g} s"
            raise
        self._session = session
        self.ready.set()
        await self._wake.wait()

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception],
                                                      Any]]:
        if isinstance(self.launch, HttpTarget):
            target = self.launch
            client = httpx2.AsyncClient(headers=target.headers, timeout=HTTP_TIMEOUT)
            async with client, streamable_http_client(target.url, http_client=client) as streams:
                yield streams
            return
        params = self.launch
        self._first_line = self.log.lines
        self._pipe = pipe = self.log.open_pipe()
        # The server exited, even if a process it started holds its stdout open.
        loop = asyncio.get_running_loop()
        pipe.on_exit = lambda: loop.call_soon_threadsafe(self._exited)
        try:
            async with stdio_client(params, errlog=cast(TextIO, pipe.writer)) as streams:
                pipe.spawned()
                yield streams
        finally:
            pipe.spawned()
            # What the server started and left behind (the SDK kills its process group
            # only when the server itself would not exit) goes with it.
            self._kill_group(pipe)

    async def _relay(self, read: ReadStream[SessionMessage | Exception],
                     sink: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        """Pass the transport's messages on to the session and notice its end (a
        stdio server's stdout closing: it exited)."""
        async with sink:
            try:
                async for item in read:
                    await sink.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
        self._exited()

    def _exited(self) -> None:
        if not self._ending:  # not the end our own teardown brings
            self._lost = True
            self._wake.set()

    async def _heard(self, message: types.ServerNotification | Exception) -> None:
        """The server says its tools changed: list them again (in a task of its own:
        this runs in the session's receive loop, which the answer needs)."""
        if (isinstance(message, types.ToolListChangedNotification) and self.ready.is_set()
                and (self._relisting is None or self._relisting.done())):
            self._relisting = asyncio.create_task(self._relist())

    async def _relist(self) -> None:
        # At most once a second, whatever it says: a server that says so again and
        # again would have the daemon do nothing else.
        await asyncio.sleep(RELIST_EVERY)
        session = self._session
        if session is None:
            return
        try:
            async with asyncio.timeout(60.0):
                self.tools = await _all_tools(session)
        except (TimeoutError, MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return  # the session is ending, or the server is busy: keep what we had
        if self.on_tools is not None:
            self.on_tools(self.tools)

    async def _logged(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message the server sends over MCP goes to its log, as stderr does."""
        data = params.data if isinstance(params.data, str) else repr(params.data)
        self.log.note(f"{params.level}: {' '.join(data.split())[:1000]}")

    def how_it_ended(self) -> str:
        """"exited", "exited (code 1)", "was killed (signal 9)"; "failed" if it did not
        exit (an HTTP session)."""
        code = self.exit_code
        if not self.exited:
            return "failed"
        if code is None:
            return "exited"
        return f"exited (code {code})" if code >= 0 else f"was killed (signal {-code})"

    async def _why(self, reason: str | None) -> str:
        """One line on why the session ended: for a stdio server that exited, what it
        printed last on stderr."""
        if self._stopping:
            return "it stopped"
        if self._cut_short is not None:
            return self._cut_short
        pipe = self._pipe
        if pipe is not None and self._lost:
            self.exited = True
            await asyncio.to_thread(pipe.exit_seen.wait, _EXIT_SEEN)
            self.exit_code = pipe.exit_code
            last = self.log.last_line(since=self._first_line)
            return last or "it printed nothing on stderr"
        return reason or ("the connection closed" if self._lost else "it ended")


async def _all_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is cut off
        page = await session.list_tools(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside anyio's exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = next((e for e in error.exceptions
                      if not isinstance(e, asyncio.CancelledError)), error.exceptions[0])
    return error


def _one_line(error: BaseException) -> str:
    """The first real error inside anyio's exception groups, in one line."""
    error = _leaf(error)
    text = " ".join(str(error).split()) or type(error).__name__
    name = type(error).__name__
    return text if text.startswith(name) else f"{name}: {text}"[:300]
