"""The provider protocol: what the think-cycle sends to a model and gets back.

Nothing here knows an SDK. A request carries the JSON context in two parts,
`context_stable + context_volatile`; the split is where a provider may put its
prompt-cache mark.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class ToolSpec(BaseModel):
    """A tool offered to the model: its name, what it does, its input JSON schema."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    input_schema: dict[str, Any]


class ToolCall(BaseModel):
    """One tool call the model asked for."""

    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    input_error: str | None = None
    """Why the model's input could not be taken (it was no JSON object): the call
    then comes back to it as an error, and the rest of its reply still counts."""


class ToolResult(BaseModel):
    """The outcome of one tool call, sent back to the model."""

    tool_use_id: str
    content: str
    is_error: bool = False


class Usage(BaseModel):
    """Token figures of one call (or a sum of calls); input excludes cached tokens."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
        )

    @property
    def total_input(self) -> int:
        """Every input token the prompt held: uncached + written to + read from the cache."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @property
    def cache_hit_share(self) -> float:
        """Share of the input served from the prompt cache (0.0 when there was no input)."""
        total = self.total_input
        return self.cache_read_tokens / total if total else 0.0


class AssistantTurn(BaseModel):
    """A prior model reply: its text and the tool calls it made."""

    kind: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolResultsTurn(BaseModel):
    """The results of the tool calls of the assistant turn before it."""

    kind: Literal["tool_results"] = "tool_results"
    results: list[ToolResult] = Field(default_factory=list)


Turn = Annotated[AssistantTurn | ToolResultsTurn, Field(discriminator="kind")]
"""A prior turn of the cycle's conversation; `kind` is the discriminator."""


class ModelRequest(BaseModel):
    """One call to the model within a think-cycle."""

    agent: str
    role: str = Field(default="", description="the agent's role (ROM `role`), for reports")
    model: str
    system: str
    tools: list[ToolSpec] = Field(default_factory=list)
    context_stable: str = Field(
        description="stable prefix of the JSON context: ROM, knowledge, files"
    )
    context_volatile: str = Field(description="the rest: task, messages, history, status")
    context_ids: list[str] = Field(default_factory=list)
    context_tokens: int = Field(default=0, ge=0)
    turns: list[Turn] = Field(default_factory=list)
    max_output_tokens: int = Field(default=4096, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)

    @property
    def context_json(self) -> str:
        """The whole JSON context (a JSON array)."""
        return self.context_stable + self.context_volatile


class ModelResponse(BaseModel):
    """What the model answered, with the tokens it cost."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop_reason: str
    usage: Usage = Field(default_factory=Usage)
    usage_note: str | None = None  # the endpoint's figures were out of bounds: what was clamped
    model: str
    provider: str


_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(value: Any) -> Any:
    """`value` with each lone UTF-16 surrogate in its strings (a JSON `\\ud800` escape
    decodes to one) replaced: such text cannot be written to a file, a log or a
    request, so a reply that has some must not reach the tools."""
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {valid_text(k): valid_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_text(v) for v in value]
    return value


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return not value.isascii() and _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


def with_valid_text(response: ModelResponse) -> ModelResponse:
    """`response`, its text and tool inputs passed through `valid_text`: the same object,
    after a look that copies nothing, when they need nothing (almost always)."""
    calls = response.tool_calls
    if not _has_surrogate(response.text) and not any(_has_surrogate(c.input) for c in calls):
        return response
    fixed = [c.model_copy(update={"input": valid_text(c.input)}) for c in calls]
    return response.model_copy(update={"text": valid_text(response.text), "tool_calls": fixed})


@runtime_checkable
class Provider(Protocol):
    """A model backend; the think-cycle talks to nothing else."""

    name: str
    offline: bool

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send one request; raise a `ModelError` subclass when the backend fails."""
        ...

    async def aclose(self) -> None:
        """Release connections; the provider is not used afterwards."""
        ...
