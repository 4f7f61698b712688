"""Scripted models for the fake Messages API (`tests.fake_anthropic`): reading a
request's context and turns, and answering with tool calls, as a test's model does."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hivemind.llm.anthropic import AnthropicProvider
from tests.fake_anthropic import FakeAnthropic, Reply, message_body


def provider(api: FakeAnthropic, key: str = "k", retries: int = 0) -> AnthropicProvider:
    """The real Anthropic provider (real SDK), pointed at the fake server."""
    return AnthropicProvider(api_key=key, base_url=api.base_url, timeout=5, max_retries=retries)


def context_entries(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON context of a request: the first user turn's text blocks, joined."""
    first = body["messages"][0]["content"]
    return list(json.loads("".join(block["text"] for block in first)))


def active_tasks(body: dict[str, Any]) -> list[str]:
    """The ids of the active tasks in the request's context."""
    return [e["metadata"]["task_id"] for e in context_entries(body)
            if e["metadata"].get("type") == "task" and e["metadata"].get("status") == "active"]


def is_first_round(body: dict[str, Any]) -> bool:
    """True if the request's last turn carries no tool results (a cycle's first call)."""
    last = body["messages"][-1]["content"]
    return not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last)


def last_results(body: dict[str, Any]) -> list[str]:
    """The tool results the model is sent back in the request's last turn."""
    last = body["messages"][-1]["content"]
    return [b["content"] if isinstance(b["content"], str) else json.dumps(b["content"])
            for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]


def text_reply(text: str, usage: dict[str, int | None] | None = None) -> Reply:
    """A reply that only says `text` (the end of the model's turn)."""
    return Reply(body=message_body([{"type": "text", "text": text}], usage=usage))


def tool_use(n: int, name: str, **args: Any) -> dict[str, Any]:
    """A tool_use block calling `name` with `args`."""
    return {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": args}


def task_completer(body: Any, result: str = "done by the model") -> Reply:
    """A model that completes every active task it is shown (with `result`), then ends
    its turn."""
    tasks = active_tasks(body)
    if not is_first_round(body):
        return text_reply("all done")
    if not tasks:
        return text_reply("nothing to do")
    calls = [tool_use(i, "complete_task", task_id=tid, result=result)
             for i, tid in enumerate(tasks)]
    return Reply(body=message_body(calls, stop_reason="tool_use"))


def scripted(*rounds: list[dict[str, Any]]) -> Callable[[Any], Reply]:
    """A model that answers with the rounds of calls in turn, then ends its turn."""
    it = iter(rounds)

    def reply(_body: Any) -> Reply:
        calls = next(it, None)
        if not calls:
            return text_reply("done")
        return Reply(body=message_body(calls, stop_reason="tool_use"))

    return reply
