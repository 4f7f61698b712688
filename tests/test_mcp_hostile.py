"""A hostile hive's server cannot swamp the prompt or break every request: thousands
of tools, a schema the Messages API would refuse, huge descriptions, a tool list that
changes all the time each end as one line in status, the agent keeping the rest."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import mcp_types as types
import pytest

from hivemind.mcp import connection
from hivemind.mcp.api import McpTool, ServerStatus
from hivemind.mcp.pool import McpPool
from hivemind.mcp.results import to_result
from hivemind.mcp.vetting import MAX_DESCRIPTION, MAX_TOOLS, schema_problem, vet_tools
from hivemind.mcpspec import McpServerSpec
from tests.helpers import until
from tests.mcp_helpers import QUICK, SERVERS


def hostile(mode: str, *more: str) -> McpServerSpec:
    return McpServerSpec(command=sys.executable, args=(str(SERVERS / "hostile.py"), mode, *more))


@pytest.fixture
async def pool(tmp_path: Path) -> AsyncIterator[McpPool]:
    pool = McpPool(tmp_path, {}, policy=QUICK)
    try:
        yield pool
    finally:
        await pool.aclose(grace=2.0)


async def test_thousands_of_tools_are_cut_to_the_first_by_name(pool: McpPool) -> None:
    await pool.attach("a", {"h": hostile("many")})
    tools = pool.tools_for("a")
    assert len(tools) == MAX_TOOLS
    assert tools[0].name == "t0000"
    [state] = pool.states()
    assert state.status is ServerStatus.READY
    assert state.error == f"it offers 5000 tools: only the first {MAX_TOOLS} by name are offered"


async def test_a_tool_with_an_invalid_schema_is_left_out_and_the_rest_offered(
        pool: McpPool) -> None:
    await pool.attach("a", {"h": hostile("badschema")})
    assert [t.name for t in pool.tools_for("a")] == ["good"]
    [state] = pool.states()
    assert state.error is not None
    assert state.error.startswith("1 tool left out: `bad` (invalid input schema at "
                                  "properties/a/type")


async def test_a_huge_description_is_cut(pool: McpPool) -> None:
    await pool.attach("a", {"h": hostile("longdesc")})
    [tool] = pool.tools_for("a")
    assert len(tool.description) == MAX_DESCRIPTION and tool.description.endswith("[cut]")


async def test_a_tool_list_that_keeps_changing_is_listed_at_most_once_a_while(
        pool: McpPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "RELIST_EVERY", 0.5)
    count = tmp_path / "listed"
    await pool.attach("a", {"h": hostile("churn", str(count))})
    assert pool.states()[0].status is ServerStatus.READY
    await asyncio.sleep(1.5)  # ~150 notices: unthrottled, as many listings
    assert len(count.read_text().splitlines()) <= 1 + 4
    assert (await pool.call("a", "h", "one", {})).text == "ok"


@pytest.mark.parametrize("schema, why", [
    ({"type": "object"}, None),
    ({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}, None),
    ({"type": "object", "properties": {"a": {"type": "strin"}}},
     "invalid input schema at properties/a/type"),
    ({"type": "object", "required": 5}, "invalid input schema at required"),
    ({"type": "array"}, "its input schema is not for an object"),
    ({"type": "object", "description": "x" * 20_000}, "its input schema is 200"),
    ({"type": "object", "default": float("nan")}, "its input schema is not JSON"),
], ids=["empty", "typical", "bad-type", "bad-required", "array", "too-large", "nan"])
def test_schema_problems_are_said_in_a_few_words(schema: dict[str, object],
                                                 why: str | None) -> None:
    said = schema_problem(schema)
    assert said == why if why is None else (said is not None and said.startswith(why))


async def test_what_a_server_says_reaches_no_terminal_as_escape_sequences(
        pool: McpPool) -> None:
    # It writes `ESC[2J ESC]0;owned BEL bye U+202E` on stderr, then exits mid-call.
    await pool.attach("a", {"h": hostile("noisy")})
    result = await pool.call("a", "h", "one", {})
    assert result.is_error
    assert result.text.endswith("\ufffd[2J\ufffd]0;owned\ufffd bye\ufffd")
    await until(lambda: pool.states()[0].error is not None, "its exit is seen")
    error = pool.states()[0].error
    assert error is not None and "owned\ufffd bye\ufffd" in error
    assert not any(c in error for c in "\x1b\x07\u202e")


def test_a_result_keeps_its_lines_and_tabs_but_no_control_characters() -> None:
    said = to_result(types.CallToolResult(content=[types.TextContent(
        type="text", text="a\tb\nc\x1b[31md\x00\x7f\x9b")]), 100)
    assert said.text == "a\tb\nc\ufffd[31md\ufffd\ufffd\ufffd"


def test_a_schema_nested_too_deep_is_left_out() -> None:
    schema: dict[str, object] = {"type": "object"}
    for _ in range(100):
        schema = {"type": "object", "properties": {"a": schema}}
    assert schema_problem(schema) == "its input schema nests deeper than 64"


def test_a_tool_list_too_large_together_keeps_its_first_tools() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(40)}}
    tools = [McpTool("h", f"t{i:03d}", "d" * 2000, schema) for i in range(100)]
    kept, said = vet_tools(tools)
    assert 0 < len(kept) < 100 and [t.name for t in kept] == [f"t{i:03d}" for i in
                                                              range(len(kept))]
    assert sum(len(t.description) + len(json.dumps(t.input_schema)) for t in kept) <= 100_000
    assert said == (f"its tools past `t{len(kept):03d}` are left out: together they are "
                    "over 100000 characters")


def test_a_result_with_windows_line_ends_keeps_them() -> None:
    said = to_result(types.CallToolResult(content=[types.TextContent(
        type="text", text="one\r\ntwo\r\n")]), 100)
    assert said.text == "one\r\ntwo\r\n"
