"""The Anthropic Messages API provider (the `anthropic` SDK, prompt caching on).

Cache marks go on the system block, the last tool and the stable part of the
JSON context, so tools → system → stable context is one cached prefix. SDK
errors are translated here, where they enter, into the `ModelError` tree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
from anthropic.types import (
    CacheControlEphemeralParam,
    ContentBlockParam,
    Message,
    MessageParam,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlockParam,
)

from hivemind.errors import (
    ModelAccessError,
    ModelConnectionError,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelUnavailableError,
)
from hivemind.llm.base import (
    AssistantTurn,
    ModelRequest,
    ModelResponse,
    ToolCall,
)
from hivemind.llm.catalog import LISTED_MOST
from hivemind.llm.usage_bounds import bounded_usage

_CACHE_MARK: CacheControlEphemeralParam = {"type": "ephemeral"}

# Anything shaped like an Anthropic key is masked too, not only the one we hold:
# an error body may echo a key the endpoint saw elsewhere.
_KEY_PATTERN = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")


def request_system(request: ModelRequest) -> list[TextBlockParam]:
    """The system prompt as one cached text block."""
    return [{"type": "text", "text": request.system, "cache_control": _CACHE_MARK}]


def request_tools(request: ModelRequest) -> list[ToolParam]:
    """The tool definitions; the last one carries the cache mark."""
    tools: list[ToolParam] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in request.tools
    ]
    if tools:
        tools[-1]["cache_control"] = _CACHE_MARK
    return tools


def request_messages(request: ModelRequest) -> list[MessageParam]:
    """The context as the first user turn (stable part cached), then the prior turns."""
    context: list[ContentBlockParam] = []
    # The API refuses empty text blocks, so an empty part is left out.
    if request.context_stable:
        context.append(
            {"type": "text", "text": request.context_stable, "cache_control": _CACHE_MARK}
        )
    if request.context_volatile:
        context.append({"type": "text", "text": request.context_volatile})
    if not context:
        context.append({"type": "text", "text": "[]"})
    messages: list[MessageParam] = [{"role": "user", "content": context}]
    for turn in request.turns:
        if isinstance(turn, AssistantTurn):
            content: list[ContentBlockParam] = []
            if turn.text:
                content.append({"type": "text", "text": turn.text})
            content.extend(_tool_use_block(call) for call in turn.tool_calls)
            if not content:
                content.append({"type": "text", "text": "(no reply)"})
            messages.append({"role": "assistant", "content": content})
        else:
            results: list[ContentBlockParam] = []
            for result in turn.results:
                block: ToolResultBlockParam = {
                    "type": "tool_result",
                    "tool_use_id": result.tool_use_id,
                    "content": result.content,
                }
                if result.is_error:
                    block["is_error"] = True
                results.append(block)
            messages.append({"role": "user", "content": results})
    return messages


def _tool_use_block(call: ToolCall) -> ToolUseBlockParam:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}


def _retry_after(headers: Any) -> float | None:
    """Seconds the API asks to wait: `retry-after-ms`, else `retry-after` in seconds (a
    date is not used)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name) or "nan") / scale
        except (TypeError, ValueError):
            continue
        if 0 < seconds < 86_400:
            return seconds
    return None


def _tool_call(call_id: str, name: str, given: object) -> ToolCall:
    """The call as the model made it; input that is no JSON object is kept out (and
    said so) rather than failing the whole reply, whose tokens were paid for."""
    if isinstance(given, dict):
        return ToolCall(id=call_id, name=name, input=given)
    kind = "null" if given is None else "a list" if isinstance(given, list) else (
        "text" if isinstance(given, str) else f"a {type(given).__name__}")
    return ToolCall(id=call_id, name=name,
                    input_error=f"the input must be a JSON object, not {kind}")


def response_from_message(message: Message, max_output: int) -> ModelResponse:
    """Translate an SDK `Message` into a `ModelResponse` (`max_output`: the request's
    max_tokens, which its usage cannot exceed)."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(_tool_call(block.id, block.name, block.input))
    usage, note = bounded_usage(message.usage, max_output)
    return ModelResponse(
        text="\n".join(t for t in texts if t),
        tool_calls=calls,
        stop_reason=message.stop_reason or "end_turn",
        usage=usage,
        usage_note=note,
        model=message.model,
        provider="anthropic",
    )


class AnthropicProvider:
    """Claude through the Messages API; errors come out translated, with their kind.

    The SDK's own retries are off by default (`max_retries=0`): the daemon retries a
    transient failure itself, so the agent's wait shows in status and counts towards
    `[daemon] give_up_after`, instead of hiding inside one call."""

    name = "anthropic"
    offline = False

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 0,
        key_env: str = "ANTHROPIC_API_KEY",
        *,
        bearer: bool = False,
    ) -> None:
        self._api_key = api_key
        self._key_env = key_env  # named in the hint when the key is refused
        self._timeout = timeout
        # `bearer`: an auth token (ANTHROPIC_AUTH_TOKEN), handed to the SDK as one.
        self._client = anthropic.AsyncAnthropic(
            api_key=None if bearer else api_key, auth_token=api_key if bearer else None,
            base_url=base_url, timeout=timeout, max_retries=max_retries,
        )

    @property
    def endpoint(self) -> str:
        """Host (and port) requests go to, for messages; never the key."""
        url = self._client.base_url
        return f"{url.host}:{url.port}" if url.port else url.host

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One non-streaming Messages call, translated both ways."""
        extra_body: dict[str, Any] | None = None
        if request.temperature is not None:
            # SDK 2.x dropped `temperature` from create(); the API still takes it.
            extra_body = {"temperature": request.temperature}
        with self._map_api_errors(request.model):
            message = await self._client.messages.create(
                model=request.model,
                max_tokens=request.max_output_tokens,
                system=request_system(request),
                tools=request_tools(request),
                messages=request_messages(request),
                extra_body=extra_body,
                # Explicit: the SDK refuses a large max_tokens under its default timeout.
                timeout=self._timeout,
            )
        try:
            return response_from_message(message, request.max_output_tokens)
        except (AttributeError, TypeError, ValueError) as e:
            # The SDK does not validate answers; a proxy may return any JSON.
            raise ModelUnavailableError(
                f"{request.model}: the answer from {self.endpoint} is not a Messages reply: "
                f"{self._redact(str(e))}"
            ) from e

    async def model_ids(self) -> list[str]:
        """The ids GET /v1/models lists, every page (at most `LISTED_MOST`); the caller
        bounds the time."""
        ids: list[str] = []
        with self._map_api_errors("the model list"):
            try:
                async for info in self._client.models.list(limit=1000):
                    ids.append(str(info.id))
                    if len(ids) >= LISTED_MOST:
                        break
            except (AttributeError, TypeError, ValueError) as e:
                raise ModelUnavailableError(
                    f"the model list from {self.endpoint} is not one: {self._redact(str(e))}"
                ) from e
        return ids

    async def aclose(self) -> None:
        """Close the SDK client and its connection pool."""
        await self._client.close()

    @contextmanager
    def _map_api_errors(self, model: str) -> Iterator[None]:
        """Turn whatever the SDK raises into our `ModelError` tree, by kind: transient
        (`ModelUnavailableError`), the agent's access (`ModelAccessError`) or this
        request (`ModelRequestError`)."""
        try:
            yield
        except anthropic.APIStatusError as e:
            raise self._status_error(model, e) from e
        except anthropic.APITimeoutError as e:
            tries = self._client.max_retries + 1
            raise ModelConnectionError(
                f"{model}: no answer from {self.endpoint} within {self._timeout:g} s"
                + (f" ({tries} tries)" if tries > 1 else "")
            ) from e
        except anthropic.APIConnectionError as e:
            cause = e.__cause__ or e
            reason = self._redact(str(cause)) or type(cause).__name__
            raise ModelConnectionError(
                f"{model}: connection to {self.endpoint} failed: {reason}"
            ) from e
        except json.JSONDecodeError as e:
            raise ModelUnavailableError(
                f"{model}: the answer from {self.endpoint} is not JSON: {self._redact(str(e))}"
            ) from e
        except anthropic.AnthropicError as e:
            raise ModelError(f"{model}: {self._redact(str(e))}") from e

    def _status_error(self, model: str, e: anthropic.APIStatusError) -> ModelError:
        """The error of an HTTP error status, of the kind its status says."""
        status = e.status_code
        detail = self._redact(e.api_message or e.message)
        prefix = f"{model}: HTTP {status}"
        wait = _retry_after(e.response.headers)
        error: ModelError
        if status in (429, 529):
            what = "rate limited" if status == 429 else "overloaded"
            asked = f" (it asks to wait {wait:g} s)" if wait is not None else ""
            error = ModelRateLimitError(f"{prefix} {what}{asked}: {detail}")
        elif status in (408, 409):  # a timeout, a conflict: both retried by the SDK too
            error = ModelConnectionError(f"{prefix} request timeout or conflict: {detail}")
        elif status in (401, 403, 404):
            error = ModelAccessError(f"{prefix} request refused: {detail} ({self._hint(status)})")
        elif 400 <= status < 500:
            error = ModelRequestError(f"{prefix} request refused: {detail}")
        else:
            error = ModelUnavailableError(f"{prefix} server error: {detail}")
        error.retry_after = wait if isinstance(error, ModelUnavailableError) else None
        return error

    def _hint(self, status: int) -> str:
        """What a person can do about a refusal that no retry will change."""
        if status == 401:
            return f"the API key was not accepted: check ${self._key_env}"
        if status == 403:
            return f"the key in ${self._key_env} may not use this model or endpoint"
        if status == 404:
            return f"no such model or endpoint at {self.endpoint}: check `model:` in the ROM"
        return ""

    def _redact(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        return _KEY_PATTERN.sub("[redacted]", text)
