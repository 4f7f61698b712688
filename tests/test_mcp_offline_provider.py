"""The offline provider calls the MCP tool a task's front matter names (`mcp:
<server>.<tool>`, `mcp_args`), then ends the task with the result's text."""

from __future__ import annotations

from typing import Any

from hivemind.llm.base import AssistantTurn, ToolResult, ToolResultsTurn, ToolSpec
from hivemind.llm.offline import OfflineProvider
from tests.test_llm_offline import TOOLS, calls_of, entry, make_request

LOOKUP = ToolSpec(name="mcp__notes__lookup", description="Look a note up",
                  input_schema={"type": "object"})
WITH_MCP = [*TOOLS, LOOKUP, ToolSpec(name="fail_task", description="", input_schema={})]
FRONT = "---\nmcp: notes.lookup\nmcp_args: {topic: bees}\n---\n# Look it up\n"


def mcp_task(content: str = FRONT) -> dict[str, Any]:
    return entry("task:t1", content, type="task", task_id="t1", status="active", title="T1")


async def test_a_task_naming_an_mcp_tool_gets_it_called_with_its_args() -> None:
    response = await OfflineProvider().complete(make_request([mcp_task()], tools=WITH_MCP))
    assert calls_of(response.tool_calls) == [("mcp__notes__lookup", {"topic": "bees"})]


async def test_its_result_completes_the_task_and_an_error_fails_it() -> None:
    provider = OfflineProvider()
    first = await provider.complete(make_request([mcp_task()], tools=WITH_MCP))
    [call] = first.tool_calls
    for is_error, ending, field in [(False, "complete_task", "result"),
                                    (True, "fail_task", "reason")]:
        turns = [AssistantTurn(tool_calls=[call]), ToolResultsTurn(results=[ToolResult(
            tool_use_id=call.id, content="Bees make honey.", is_error=is_error)])]
        later = await provider.complete(make_request([mcp_task()], tools=WITH_MCP, turns=turns))
        [(name, args)] = calls_of(later.tool_calls)
        assert (name, args["task_id"]) == (ending, "t1")
        assert "Bees make honey." in args[field]


async def test_a_tool_not_offered_fails_the_task_saying_why() -> None:
    tools = [*TOOLS, ToolSpec(name="fail_task", description="", input_schema={})]
    response = await OfflineProvider().complete(make_request([mcp_task()], tools=tools))
    [(name, args)] = calls_of(response.tool_calls)
    assert name == "fail_task"
    assert "mcp__notes__lookup is not among this agent's tools" in args["reason"]
    assert "hivemind trust" in args["reason"]


async def test_a_malformed_mcp_field_fails_the_task_saying_how_to_write_it() -> None:
    tools = [*WITH_MCP]
    response = await OfflineProvider().complete(
        make_request([mcp_task("---\nmcp: notes\n---\n# x\n")], tools=tools))
    [(name, args)] = calls_of(response.tool_calls)
    assert name == "fail_task"
    assert "as <server>.<tool>" in args["reason"]
