"""The Anthropic provider: the real SDK against the fake Messages API on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import pytest

from hivemind.errors import (
    ModelAccessError,
    ModelConnectionError,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelUnavailableError,
)
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.llm.base import (
    AssistantTurn,
    ModelRequest,
    ToolCall,
    ToolResult,
    ToolResultsTurn,
    ToolSpec,
)
from tests.fake_anthropic import FakeAnthropic, Reply, error_body

KEY = "sk-ant-api03-TESTKEY0123456789abcdefXYZ"
CACHE = {"type": "ephemeral"}
STABLE = [
    {
        "id": "rom:ada",
        "content": "You are Ada.",
        "confidence": 1.0,
        "priority": "CRITICAL",
        "metadata": {"type": "rom", "agent": "ada"},
    },
    {
        "id": "knowledge/style.md",
        "content": "Be brief.",
        "confidence": 1.0,
        "priority": "MEDIUM",
        "metadata": {"type": "knowledge"},
    },
]
VOLATILE = [
    {
        "id": "task:t1",
        "content": "Write a haiku.",
        "confidence": 1.0,
        "priority": "HIGH",
        "metadata": {"type": "task", "task_id": "t1", "status": "active"},
    },
]
TOOLS = [
    ToolSpec(name="send_message", description="Send mail.", input_schema={"type": "object"}),
    ToolSpec(name="write_file", description="Write a file.", input_schema={"type": "object"}),
]


def split_context(stable: list[dict[str, Any]], volatile: list[dict[str, Any]]) -> tuple[str, str]:
    """One JSON array cut where the stable entries end."""
    text = json.dumps(stable + volatile)
    if not stable or not volatile:
        return ("", text) if not stable else (text, "")
    cut = len(json.dumps(stable))  # the stable part keeps the separating comma
    return text[:cut], text[cut:]


def make_request(**overrides: Any) -> ModelRequest:
    stable, volatile = split_context(STABLE, VOLATILE)
    fields: dict[str, Any] = {
        "agent": "ada",
        "model": "claude-sonnet-5-5",
        "system": "You are an agent of a hive.",
        "tools": TOOLS,
        "context_stable": stable,
        "context_volatile": volatile,
        "context_ids": [e["id"] for e in STABLE + VOLATILE],
        "context_tokens": 42,
        "max_output_tokens": 512,
    }
    fields.update(overrides)
    return ModelRequest(**fields)


@pytest.fixture
def api() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def provider(api: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key=KEY, base_url=api.base_url, timeout=5.0, max_retries=2)
    yield p
    await p.aclose()


async def complete_with(
    api: FakeAnthropic,
    request: ModelRequest | None = None,
    *,
    timeout: float = 5.0,
    max_retries: int = 2,
) -> Any:
    p = AnthropicProvider(
        api_key=KEY, base_url=api.base_url, timeout=timeout, max_retries=max_retries
    )
    try:
        return await p.complete(request or make_request())
    finally:
        await p.aclose()


# -- what is sent -------------------------------------------------------------------


async def test_tools_carry_the_cache_mark_on_the_last_one_only(
    api: FakeAnthropic, provider: AnthropicProvider
) -> None:
    await provider.complete(make_request())
    tools = api.last_body["tools"]
    assert [t["name"] for t in tools] == ["send_message", "write_file"]
    assert tools[-1]["cache_control"] == CACHE
    assert "cache_control" not in tools[0]
    assert tools[0]["input_schema"] == {"type": "object"}


async def test_system_is_one_cached_text_block(
    api: FakeAnthropic, provider: AnthropicProvider
) -> None:
    await provider.complete(make_request())
    assert api.last_body["system"] == [
        {"type": "text", "text": "You are an agent of a hive.", "cache_control": CACHE}
    ]


async def test_first_user_turn_marks_the_stable_part_and_joins_into_the_json_context(
    api: FakeAnthropic, provider: AnthropicProvider
) -> None:
    request = make_request()
    await provider.complete(request)
    first = api.last_body["messages"][0]
    assert first["role"] == "user"
    stable, volatile = first["content"]
    assert stable == {"type": "text", "text": request.context_stable, "cache_control": CACHE}
    assert volatile == {"type": "text", "text": request.context_volatile}
    assert json.loads(stable["text"] + volatile["text"]) == STABLE + VOLATILE


@pytest.mark.parametrize(
    ("stable", "volatile", "expected_marks"),
    [([], VOLATILE, [False]), (STABLE, [], [True])],
    ids=["no-stable-part", "no-volatile-part"],
)
async def test_an_empty_context_part_is_left_out(
    api: FakeAnthropic,
    provider: AnthropicProvider,
    stable: list[Any],
    volatile: list[Any],
    expected_marks: list[bool],
) -> None:
    s, v = split_context(stable, volatile)
    await provider.complete(make_request(context_stable=s, context_volatile=v))
    blocks = api.last_body["messages"][0]["content"]
    assert ["cache_control" in b for b in blocks] == expected_marks
    assert json.loads("".join(b["text"] for b in blocks)) == stable + volatile


async def test_max_tokens_and_model_come_from_the_request(
    api: FakeAnthropic, provider: AnthropicProvider
) -> None:
    await provider.complete(make_request(model="claude-haiku-5-5", max_output_tokens=30_000))
    assert api.last_body["model"] == "claude-haiku-5-5"
    assert api.last_body["max_tokens"] == 30_000


@pytest.mark.parametrize(
    ("temperature", "sent"), [(None, False), (0.2, True), (0.0, True)], ids=["unset", "set", "zero"]
)
async def test_temperature_is_in_the_body_only_when_set(
    api: FakeAnthropic, provider: AnthropicProvider, temperature: float | None, sent: bool
) -> None:
    await provider.complete(make_request(temperature=temperature))
    assert ("temperature" in api.last_body) is sent
    if sent:
        assert api.last_body["temperature"] == temperature


async def test_prior_turns_are_rendered_as_tool_use_then_tool_result(
    api: FakeAnthropic, provider: AnthropicProvider
) -> None:
    turns = [
        AssistantTurn(
            text="Let me write.",
            tool_calls=[
                ToolCall(id="toolu_1", name="write_file", input={"path": "workspace/a.md"}),
                ToolCall(id="toolu_2", name="send_message", input={"to": "human"}),
            ],
        ),
        ToolResultsTurn(
            results=[
                ToolResult(tool_use_id="toolu_1", content="written"),
                ToolResult(tool_use_id="toolu_2", content="no such agent", is_error=True),
            ]
        ),
    ]
    await provider.complete(make_request(turns=turns))
    _, assistant, results = api.last_body["messages"]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me write."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "write_file",
                "input": {"path": "workspace/a.md"},
            },
            {"type": "tool_use", "id": "toolu_2", "name": "send_message", "input": {"to": "human"}},
        ],
    }
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "written"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": "no such agent",
                "is_error": True,
            },
        ],
    }


async def test_the_key_goes_out_as_a_bearer_token(
    api: FakeAnthropic, provider: AnthropicProvider
) -> None:
    await provider.complete(make_request())
    headers = api.message_requests[-1].headers
    assert headers.get("authorization") == f"Bearer {KEY}" or headers.get("x-api-key") == KEY


# -- what comes back ----------------------------------------------------------------


async def test_a_tool_use_reply_becomes_tool_calls(
    api: FakeAnthropic, provider: AnthropicProvider
) -> None:
    api.reply_tool_use(
        "send_message", {"to": "human", "subject": "hi"}, id="toolu_9", text="Replying."
    )
    response = await provider.complete(make_request())
    assert response.text == "Replying."
    assert [(c.id, c.name, c.input) for c in response.tool_calls] == [
        ("toolu_9", "send_message", {"to": "human", "subject": "hi"})
    ]
    assert response.stop_reason == "tool_use"
    assert (response.provider, response.model) == ("anthropic", "claude-sonnet-5-5")


async def test_a_text_reply_has_no_tool_calls(
    api: FakeAnthropic, provider: AnthropicProvider
) -> None:
    api.reply_text("All done.", stop_reason="max_tokens")
    response = await provider.complete(make_request())
    assert (response.text, response.tool_calls, response.stop_reason) == (
        "All done.",
        [],
        "max_tokens",
    )


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "input_tokens": 12,
                "output_tokens": 7,
                "cache_creation_input_tokens": 300,
                "cache_read_input_tokens": 900,
            },
            (12, 7, 300, 900),
        ),
        (
            {
                "input_tokens": 5,
                "output_tokens": 1,
                "cache_creation_input_tokens": None,
                "cache_read_input_tokens": None,
            },
            (5, 1, 0, 0),
        ),
    ],
    ids=["cache-figures", "cache-figures-null"],
)
async def test_usage_is_parsed_with_cache_figures(
    api: FakeAnthropic,
    provider: AnthropicProvider,
    usage: dict[str, int | None],
    expected: tuple[int, int, int, int],
) -> None:
    api.reply_text("ok", usage=usage)
    u = (await provider.complete(make_request())).usage
    assert (u.input_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens) == expected


# -- failures -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(429, "rate_limit_error"), (529, "overloaded_error"), (500, "api_error")],
    ids=["429", "529", "500"],
)
async def test_transient_errors_are_retried_then_succeed(
    api: FakeAnthropic, status: int, error_type: str
) -> None:
    api.reply_error(status, error_type, "try again", times=2)
    response = await complete_with(api, max_retries=2)
    assert response.text == "ok"
    assert len(api.message_requests) == 3


@pytest.mark.parametrize(
    ("status", "error_type", "error_class"),
    [
        (529, "overloaded_error", ModelRateLimitError),
        (429, "rate_limit_error", ModelRateLimitError),
    ],
    ids=["529", "429"],
)
async def test_persistent_overload_raises_rate_limit_error(
    api: FakeAnthropic, status: int, error_type: str, error_class: type[ModelError]
) -> None:
    api.reply_error(status, error_type, "Overloaded", times=5)
    with pytest.raises(error_class, match=f"HTTP {status}") as caught:
        await complete_with(api, max_retries=1)
    assert "Overloaded" in str(caught.value)
    assert len(api.message_requests) == 2


async def test_persistent_server_error_is_a_model_error_not_a_rate_limit(
    api: FakeAnthropic,
) -> None:
    api.reply_error(500, "api_error", "Internal server error", times=5)
    with pytest.raises(ModelUnavailableError, match="HTTP 500") as caught:
        await complete_with(api, max_retries=1)
    assert not isinstance(caught.value, ModelRateLimitError | ModelRequestError)


@pytest.mark.parametrize(
    ("headers", "wait"),
    [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "2500"}, 2.5),
     ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5), ({"retry-after": "soon"}, None),
     ({}, None)],
    ids=["seconds", "ms", "ms-first", "unreadable", "none"],
)
async def test_a_transient_error_carries_the_wait_the_api_asked_for(
    api: FakeAnthropic, headers: dict[str, str], wait: float | None
) -> None:
    """Only `retry-after` in seconds was read; `retry-after-ms` was lost."""
    api.reply(Reply(status=429, body=error_body("rate_limit_error", "slow down"),
                    headers=headers))
    with pytest.raises(ModelRateLimitError) as caught:
        await complete_with(api, max_retries=0)
    assert caught.value.retry_after == wait


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 529])
async def test_statuses_the_sdk_would_retry_are_transient(api: FakeAnthropic, status: int) -> None:
    api.reply_error(status, "api_error", "try later")
    with pytest.raises(ModelUnavailableError):
        await complete_with(api, max_retries=0)


async def test_the_sdk_does_not_retry_by_default(api: FakeAnthropic) -> None:
    """The daemon retries, visibly: one try per call, so a wait shows in status."""
    api.reply_error(529, "overloaded_error", "Overloaded", times=5)
    p = AnthropicProvider(api_key=KEY, base_url=api.base_url, timeout=5.0)
    try:
        with pytest.raises(ModelRateLimitError):
            await p.complete(make_request())
    finally:
        await p.aclose()
    assert len(api.message_requests) == 1


@pytest.mark.parametrize(
    ("status", "error_type", "message", "hint", "kind"),
    [
        (400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum",
         None, ModelRequestError),
        (401, "authentication_error", "invalid x-api-key",
         "(the API key was not accepted: check $ANTHROPIC_API_KEY)", ModelAccessError),
        (403, "permission_error", "not allowed",
         "(the key in $ANTHROPIC_API_KEY may not use this model or endpoint)", ModelAccessError),
        (404, "not_found_error", "model: claude-nope",
         "(no such model or endpoint at 127.0.0.1:{port}: check `model:` in the ROM)",
         ModelAccessError),
    ],
    ids=["too-long", "auth", "forbidden", "unknown-model"],
)
async def test_a_refused_request_raises_its_kind_with_the_api_message(
    api: FakeAnthropic, status: int, error_type: str, message: str, hint: str | None,
    kind: type[ModelError],
) -> None:
    """The key or the model (the agent cannot go on) apart from this one request."""
    api.reply_error(status, error_type, message)
    with pytest.raises(kind) as caught:
        await complete_with(api)
    assert not isinstance(caught.value, ModelUnavailableError)
    assert message in str(caught.value)
    assert f"HTTP {status}" in str(caught.value)
    assert len(api.message_requests) == 1, "a refused request is not retried"
    # What a person can do about it, when no retry will help.
    port = api.base_url.rsplit(":", 1)[1].strip("/")
    if hint is None:
        assert str(caught.value).endswith(message)
    else:
        assert str(caught.value).endswith(hint.format(port=port))


async def test_a_refused_key_names_the_variable_it_came_from(api: FakeAnthropic) -> None:
    from hivemind.llm.select import make_provider
    from hivemind.settings import ProviderSettings

    api.reply_error(401, "authentication_error", "invalid x-api-key")
    settings = ProviderSettings(api_key_env="TEAM_CLAUDE_KEY", base_url=api.base_url)
    provider = make_provider(settings, env={"TEAM_CLAUDE_KEY": KEY})
    assert isinstance(provider, AnthropicProvider)
    try:
        with pytest.raises(ModelAccessError, match=r"check \$TEAM_CLAUDE_KEY\)$"):
            await provider.complete(make_request())
    finally:
        await provider.aclose()


async def test_a_reset_connection_is_retried(api: FakeAnthropic) -> None:
    api.reset_connection()
    response = await complete_with(api, max_retries=1)
    assert response.text == "ok"
    assert len(api.message_requests) == 2


async def test_a_connection_reset_beyond_the_retries_raises_connection_error(
    api: FakeAnthropic,
) -> None:
    api.reset_connection(times=3)
    with pytest.raises(ModelConnectionError, match=r"connection to 127\.0\.0\.1:\d+ failed"):
        await complete_with(api, max_retries=0)


async def test_a_slow_answer_raises_connection_error_after_the_timeout(
    api: FakeAnthropic,
) -> None:
    api.reply_slow(3.0)
    started = time.monotonic()
    with pytest.raises(ModelConnectionError, match=r"within 0\.2 s"):
        await complete_with(api, timeout=0.2, max_retries=0)
    assert time.monotonic() - started < 2.0


async def test_a_hung_request_is_a_transient_error_after_the_timeout(
    api: FakeAnthropic,
) -> None:
    api.hang()
    with pytest.raises(ModelUnavailableError, match=r"within 0\.3 s"):
        await complete_with(api, timeout=0.3, max_retries=0)


async def test_an_unreachable_endpoint_raises_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = AnthropicProvider(
        api_key=KEY, base_url=f"http://127.0.0.1:{port}", timeout=1.0, max_retries=0
    )
    try:
        with pytest.raises(ModelConnectionError, match=f"127.0.0.1:{port}"):
            await p.complete(make_request())
    finally:
        await p.aclose()


async def test_an_unparsable_body_raises_model_error(api: FakeAnthropic) -> None:
    api.reply_raw(200, b"<html>gateway</html>", {"content-type": "text/html"})
    with pytest.raises(ModelError):
        await complete_with(api, max_retries=0)


@pytest.mark.parametrize(
    "script",
    [
        lambda a: a.reply_error(401, "authentication_error", f"invalid x-api-key: {KEY}"),
        lambda a: a.reply_error(400, "invalid_request_error", f"bad header Bearer {KEY[:-3]}xyz"),
        lambda a: a.reply_error(529, "overloaded_error", f"overloaded for {KEY}", times=5),
        lambda a: a.reply_error(500, "api_error", f"boom {KEY}", times=5),
        lambda a: a.reset_connection(times=5),
        lambda a: a.reply_raw(200, f"not json {KEY}"),
    ],
    ids=["401-echoes-key", "400-echoes-other-key", "529", "500", "reset", "garbage"],
)
async def test_the_api_key_never_appears_in_an_error_message(
    api: FakeAnthropic, script: Any
) -> None:
    script(api)
    with pytest.raises(ModelError) as caught:
        await complete_with(api, max_retries=0)
    assert KEY not in str(caught.value)
    assert "sk-ant-" not in str(caught.value)
    assert KEY not in repr(caught.value.args)


async def test_aclose_closes_the_client(api: FakeAnthropic) -> None:
    p = AnthropicProvider(api_key=KEY, base_url=api.base_url, timeout=1.0, max_retries=0)
    await p.complete(make_request())
    await p.aclose()
    with pytest.raises(ModelError):
        await p.complete(make_request())


async def test_the_fake_server_counts_tokens_for_the_real_sdk(api: FakeAnthropic) -> None:
    client = anthropic.AsyncAnthropic(api_key=KEY, base_url=api.base_url, max_retries=0)
    try:
        counted = await client.messages.count_tokens(
            model="claude-sonnet-5-5", messages=[{"role": "user", "content": "hello " * 40}]
        )
    finally:
        await client.close()
    assert counted.input_tokens > 0
    assert api.requests[-1].path == "/v1/messages/count_tokens"
