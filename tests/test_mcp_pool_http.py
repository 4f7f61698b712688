"""The MCP pool over streamable HTTP: a server of the tests on 127.0.0.1, listed and
called through the SDK's HTTP client; an endpoint that fails mid-call."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hivemind.mcp.api import ServerStatus
from hivemind.mcp.pool import McpPool
from hivemind.mcpspec import McpServerSpec
from tests.mcp_helpers import QUICK, SERVERS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def endpoint() -> Iterator[str]:
    """A running streamable-HTTP server of the tests: its URL."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(SERVERS / "search.py"), str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):
            assert server.poll() is None and time.monotonic() < deadline, "no server"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait()


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[McpPool]:
    pool = McpPool(tmp_path, {"SEARCH_KEY": "k-123"}, policy=QUICK)
    try:
        yield pool
    finally:
        await pool.aclose(grace=2.0)


async def test_an_http_servers_tools_are_listed_and_called(pool: McpPool, endpoint: str) -> None:
    await pool.attach("lead", {"search": McpServerSpec(url=endpoint, tools=["find", "die"])})
    assert [t.full_name for t in pool.tools_for("lead")] == [
        "mcp__search__die", "mcp__search__find"]
    result = await pool.call("lead", "search", "find", {"q": "bees"})
    assert (result.text, result.is_error) == ("3 pages about bees", False)
    [state] = pool.states()
    assert (state.transport, state.status, state.tools, state.pid) == (
        "http", ServerStatus.READY, 3, None)


async def test_headers_are_sent_with_variables_from_the_pools_environ(
        pool: McpPool, endpoint: str) -> None:
    spec = McpServerSpec(url=endpoint, headers={"Authorization": "Bearer ${SEARCH_KEY}"})
    await pool.attach("lead", {"search": spec})
    result = await pool.call("lead", "search", "header", {"name": "Authorization"})
    assert result.text == "Bearer k-123"


async def test_an_endpoint_that_fails_mid_call_errs_the_call_then_the_server_fails(
        pool: McpPool, endpoint: str) -> None:
    await pool.attach("lead", {"search": McpServerSpec(url=endpoint)})
    result = await pool.call("lead", "search", "die", {})
    assert result.is_error and result.text.startswith("the server `search` ")
    assert "during the call" in result.text
    deadline = time.monotonic() + 60
    while pool.states()[0].status != ServerStatus.FAILED:
        assert time.monotonic() < deadline, pool.states()
        await asyncio.sleep(0.05)
    [state] = pool.states()
    assert state.error is not None and "\n" not in state.error
    assert pool.tools_for("lead") == []


async def test_an_endpoint_nobody_listens_on_is_failed_with_the_reason(pool: McpPool) -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    await pool.attach("lead", {"search": McpServerSpec(url=url)})
    [state] = pool.states()
    assert state.status == ServerStatus.FAILED
    assert state.error is not None and "connect" in state.error.lower()
