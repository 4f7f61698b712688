"""The offline provider: deterministic tool calls from the JSON context, no network."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hivemind.errors import ModelRequestError
from hivemind.llm.base import (
    AssistantTurn,
    ModelRequest,
    Provider,
    ToolCall,
    ToolResult,
    ToolResultsTurn,
    ToolSpec,
)
from hivemind.llm.offline import OfflineProvider, workspace_path

TOOL_NAMES = ["send_message", "write_file", "complete_task", "read_file"]
TOOLS = [ToolSpec(name=n, description=n, input_schema={"type": "object"}) for n in TOOL_NAMES]


def entry(entry_id: str, content: str = "", **metadata: Any) -> dict[str, Any]:
    return {
        "id": entry_id,
        "content": content,
        "confidence": 1.0,
        "priority": "HIGH",
        "metadata": metadata,
    }


ROM = entry("rom:ada", "You are Ada.", type="rom", agent="ada", role="writer")
KNOWLEDGE = entry("knowledge/style.md", "Be brief.", type="knowledge")


def task(task_id: str, status: str = "active", **extra: Any) -> dict[str, Any]:
    return entry(
        f"task:{task_id}",
        f"Do {task_id}.",
        type="task",
        task_id=task_id,
        status=status,
        title=f"Title {task_id}",
        **extra,
    )


def message(msg_id: str, sender: str, subject: str, read: bool = False) -> dict[str, Any]:
    return entry(
        f"msg:{msg_id}.md",  # an entry names its mail by its id; no message_id, no `to`
        "Hello",
        type="message",
        subject=subject,
        read=read,
        **{"from": sender},
    )


def make_request(
    volatile: list[dict[str, Any]], stable: list[dict[str, Any]] | None = None, **overrides: Any
) -> ModelRequest:
    stable = [ROM, KNOWLEDGE] if stable is None else stable
    text = json.dumps(stable + volatile)
    cut = len(json.dumps(stable)) if stable and volatile else (len(text) if stable else 0)
    fields: dict[str, Any] = {
        "agent": "ada",
        "model": "claude-sonnet-5-5",
        "system": "You are an agent of a hive.",
        "tools": TOOLS,
        "context_stable": text[:cut],
        "context_volatile": text[cut:],
        "context_ids": [e["id"] for e in stable + volatile],
        "context_tokens": 321,
    }
    fields.update(overrides)
    return ModelRequest(**fields)


def calls_of(calls: list[ToolCall]) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.input) for c in calls]


async def test_it_is_a_provider_that_says_it_is_offline() -> None:
    provider = OfflineProvider()
    assert isinstance(provider, Provider)
    assert (provider.name, provider.offline) == ("offline", True)


async def test_the_same_request_gives_the_same_calls() -> None:
    request = make_request([task("t1"), message("m1", "human", "Hi")])
    first = await OfflineProvider().complete(request)
    again = await OfflineProvider().complete(request)
    assert first.tool_calls == again.tool_calls
    assert first.text == again.text
    assert [c.id for c in first.tool_calls] == [f"offline-{n}" for n in range(1, 5)]


async def test_an_active_task_is_acknowledged_written_up_and_completed() -> None:
    response = await OfflineProvider().complete(make_request([task("t1", reply_to="bob")]))
    (send, ack), (write, note), (done, result) = calls_of(response.tool_calls)
    assert (send, write, done) == ("send_message", "write_file", "complete_task")
    assert ack["to"] == "bob"
    assert ack["subject"] == "[offline] Ack: Title t1"
    assert ack["task"] == "t1"
    assert "offline provider" in ack["body"] and "no model was called" in ack["body"]
    assert note["path"] == "workspace/t1.md"
    assert result == {"task_id": "t1", "result": result["result"]}
    assert "workspace/t1.md" in result["result"] and "offline provider" in result["result"]
    assert response.stop_reason == "tool_use"


async def test_the_written_summary_names_role_task_blocks_and_tokens() -> None:
    request = make_request([task("t1")])
    response = await OfflineProvider().complete(request)
    content = next(c.input["content"] for c in response.tool_calls if c.name == "write_file")
    assert content.startswith("> Written by the offline provider (no model was called).")
    assert "writer" in content
    assert "Do t1." in content
    assert all(f"`{block_id}`" in content for block_id in request.context_ids)
    assert "321 tokens" in content


async def test_an_acknowledgement_without_reply_to_goes_to_the_human() -> None:
    response = await OfflineProvider().complete(make_request([task("t1")]))
    assert response.tool_calls[0].input["to"] == "human"


async def test_an_acknowledgement_goes_to_reply_to_but_never_to_the_agent_itself() -> None:
    """A task created by the agent that does it asks to tell that agent: an agent may
    not mail itself, so the acknowledgement goes to the human."""
    response = await OfflineProvider().complete(
        make_request([task("t1", reply_to="bob"), task("t2", reply_to="ada")])
    )
    acks = [c.input["to"] for c in response.tool_calls if c.name == "send_message"]
    assert acks == ["bob", "human"]


async def test_each_active_task_gets_its_three_calls_and_others_none() -> None:
    volatile = [task("t1"), task("t2"), task("t3", status="pending")]
    response = await OfflineProvider().complete(make_request(volatile))
    completed = [c.input["task_id"] for c in response.tool_calls if c.name == "complete_task"]
    assert completed == ["t1", "t2"]
    assert len(response.tool_calls) == 6


async def test_a_task_id_is_made_safe_for_the_workspace_path() -> None:
    assert workspace_path("../../etc/passwd") == "workspace/etc-passwd.md"
    assert workspace_path("2024 Q1 report") == "workspace/2024-Q1-report.md"


async def test_unread_human_mail_gets_exactly_one_reply() -> None:
    response = await OfflineProvider().complete(make_request([message("m1", "human", "Status?")]))
    assert calls_of(response.tool_calls) == [
        (
            "send_message",
            {
                "to": "human",
                "subject": "[offline] Re: Status?",
                "body": response.tool_calls[0].input["body"],
                "in_reply_to": "msg:m1.md",  # the entry's id: send_message takes it
            },
        )
    ]
    assert "offline provider" in response.tool_calls[0].input["body"]


@pytest.mark.parametrize(
    "mail",
    [
        message("m1", "bob", "[offline] Re: Status?"),
        message("m2", "bob", "[offline] Ack: Title t1"),
        message("m3", "unknown", "Who am I?"),
        message("m4", "human", "Old news", read=True),
    ],
    ids=["offline-reply", "offline-ack", "unknown-sender", "already-read"],
)
async def test_some_mail_is_never_answered(mail: dict[str, Any]) -> None:
    response = await OfflineProvider().complete(make_request([mail]))
    assert response.tool_calls == []
    assert response.stop_reason == "end_turn"
    assert response.text.startswith("[offline provider]")


async def test_only_offered_tools_are_called() -> None:
    tools = [t for t in TOOLS if t.name != "write_file"]
    response = await OfflineProvider().complete(make_request([task("t1")], tools=tools))
    assert [c.name for c in response.tool_calls] == ["send_message", "complete_task"]
    assert "workspace/" not in response.tool_calls[1].input["result"]


async def test_a_later_round_ends_the_cycle() -> None:
    provider = OfflineProvider()
    request = make_request([task("t1")])
    first = await provider.complete(request)
    turns = [
        AssistantTurn(text=first.text, tool_calls=first.tool_calls),
        ToolResultsTurn(
            results=[ToolResult(tool_use_id=c.id, content="ok") for c in first.tool_calls]
        ),
    ]
    second = await provider.complete(request.model_copy(update={"turns": turns}))
    assert second.tool_calls == []
    assert second.stop_reason == "end_turn"
    assert second.text == "[offline provider] done: 3 tool calls"


async def test_every_text_says_it_comes_from_the_offline_provider() -> None:
    response = await OfflineProvider().complete(make_request([task("t1"), message("m", "a", "x")]))
    assert response.text.startswith("[offline provider]")
    for call in response.tool_calls:
        text = " ".join(str(v) for k, v in call.input.items() if k in ("body", "content", "result"))
        assert "offline provider" in text


async def test_usage_counts_the_context_and_reports_a_cache_write_then_a_read() -> None:
    provider = OfflineProvider()
    request = make_request([task("t1")])
    first = (await provider.complete(request)).usage
    second = (await provider.complete(request)).usage
    assert first.cache_write_tokens > 0 and first.cache_read_tokens == 0
    assert second.cache_read_tokens == first.cache_write_tokens and second.cache_write_tokens == 0
    assert first.total_input == second.total_input >= request.context_tokens
    assert first.output_tokens > 0


async def test_a_changed_stable_part_is_a_cache_write_again() -> None:
    provider = OfflineProvider()
    await provider.complete(make_request([task("t1")]))
    other_rom = entry("rom:ada", "You are Ada, edited.", type="rom", agent="ada")
    usage = (await provider.complete(make_request([task("t1")], stable=[other_rom]))).usage
    assert usage.cache_read_tokens == 0 and usage.cache_write_tokens > 0


async def test_the_cache_is_tracked_per_agent() -> None:
    provider = OfflineProvider()
    await provider.complete(make_request([task("t1")]))
    usage = (await provider.complete(make_request([task("t1")], agent="bob"))).usage
    assert usage.cache_read_tokens == 0


async def test_a_context_that_is_not_a_json_array_is_refused() -> None:
    with pytest.raises(ModelRequestError, match="not valid JSON"):
        await OfflineProvider().complete(make_request([], context_stable="[{", context_volatile=""))


async def test_an_empty_context_means_nothing_to_do() -> None:
    response = await OfflineProvider().complete(make_request([], stable=[]))
    assert response.tool_calls == []
    assert "nothing to do" in response.text


def split_like_the_builder(entries: list[dict[str, Any]], stable_count: int) -> tuple[str, str]:
    encoded = [json.dumps(e) for e in entries]
    stable = "[" + ",".join(encoded[:stable_count])
    rest = ",".join(encoded[stable_count:])
    if rest and stable_count:
        rest = "," + rest
    return stable, rest + "]"


@pytest.mark.parametrize("stable_count", [0, 1, 2, 3, 4])
async def test_the_context_read_in_two_parts_is_the_context_read_whole(
    stable_count: int,
) -> None:
    """The stable part is parsed once per agent while unchanged; every request still
    gives the calls of its whole context."""
    provider, plain = OfflineProvider(), OfflineProvider()
    for active in (["t1"], ["t1", "t2"], [], ["t3"]):
        entries = [ROM, KNOWLEDGE, *(task(t) for t in active), message("m1", "human", "Hi")]
        stable, volatile = split_like_the_builder(entries, min(stable_count, len(entries)))
        request = make_request([], context_stable=stable, context_volatile=volatile)
        whole = make_request([], context_stable=stable + volatile, context_volatile="")
        got = await provider.complete(request)
        want = await plain.complete(whole)
        assert calls_of(got.tool_calls) == calls_of(want.tool_calls)
        assert len(got.tool_calls) == 3 * len(active) + 1


async def test_a_changed_stable_part_is_read_again() -> None:
    provider = OfflineProvider()
    for asker in ("bob", "cy"):
        stable, volatile = split_like_the_builder([ROM, task("t1", reply_to=asker)], 2)
        request = make_request([], context_stable=stable, context_volatile=volatile)
        [ack, *_] = (await provider.complete(request)).tool_calls
        assert ack.input["to"] == asker


async def test_a_broken_volatile_part_is_refused_like_a_broken_whole() -> None:
    stable, _ = split_like_the_builder([ROM, task("t1")], 1)
    with pytest.raises(ModelRequestError, match="not valid JSON"):
        await OfflineProvider().complete(
            make_request([], context_stable=stable, context_volatile=',{"id": ]')
        )
