"""The audit records: one model per kind of line of `.hivemind/audit/<agent>.jsonl`.

Every line is a JSON object whose `event` says its kind; `AuditLog` writes these
models and every reader (restart, `hivemind log`, held work, budgets) reads them back
through `read_record`, one TypeAdapter over the union. The file outlives versions
and sits in someone else's hive: a field missing takes its default, a field unknown
is kept as it is (so `log --json` shows the line as written), an event unknown reads
as an `OtherRecord`; a line that fits no model is skipped, never fatal.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    with_config,
)
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from 3.12

from hivemind.llm.base import Usage


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow")


class AuditRecord(_Lenient):
    """Fields every record has: its kind, when it was written, the agent's cycle."""

    event: str | None = None
    at: str | None = None  # ISO time, as written (kept as text: read back unchanged)
    cycle: int | None = None

    @property
    def time(self) -> datetime | None:
        """When the record was written (UTC); None if its `at` is not a time."""
        try:
            at = datetime.fromisoformat(str(self.at))
        except ValueError:
            return None
        return at if at.tzinfo else at.replace(tzinfo=UTC)

    def as_json(self) -> dict[str, Any]:
        """The record as its line holds it (read back: only the fields the line had)."""
        return self.model_dump(exclude_unset=True)


class CycleStart(AuditRecord):
    """Written before a cycle calls the model; without its `cycle` record it was cut."""

    event: Literal["cycle_start"] = "cycle_start"
    tasks: list[str] = Field(default_factory=list)
    mail: list[str] = Field(default_factory=list)


# Entries of the context (tens a cycle) are typed dicts: written as built, no model each.
@with_config(ConfigDict(extra="allow"))
class KeptEntry(TypedDict):
    """A context entry the model was sent, with its tokens."""

    id: str
    tokens: int


@with_config(ConfigDict(extra="allow"))
class DroppedEntry(TypedDict):
    """A block left out of the context, and why."""

    id: str
    reason: str
    tokens: int


class ToolCallRecord(_Lenient):
    """One tool call of the model, its result cut short (`toolrun.short`)."""

    name: str | None = None
    input: Any = None
    result: Any = None
    error: bool = False


class EffectsRecord(_Lenient):
    """What the cycle's tools changed (`tools.base.CycleEffects`)."""

    messages_sent: list[str] = Field(default_factory=list)
    files_written: list[str] = Field(default_factory=list)
    tasks_created: list[str] = Field(default_factory=list)
    tasks_completed: list[str] = Field(default_factory=list)
    tasks_failed: list[str] = Field(default_factory=list)
    memories: list[dict[str, Any]] = Field(default_factory=list)
    waits: dict[str, str] = Field(default_factory=dict)
    refusals: list[str] = Field(default_factory=list)
    delegated: dict[str, str] = Field(default_factory=dict)


class TrackRecord(_Lenient):
    """A held task's track as the cycle left it (`followup.TaskTrack`)."""

    attempt: int | None = None
    rounds: int = 0
    idle: int = 0
    waits: str | None = None
    asked: list[str] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)


class CycleRecord(AuditRecord):
    """What one cycle was sent, did and cost: written when it ends, whatever happened."""

    event: Literal["cycle"] = "cycle"
    agent: str | None = None
    provider: str | None = None
    tasks: list[str] = Field(default_factory=list)
    mail: list[str] = Field(default_factory=list)
    kept: list[KeptEntry] = Field(default_factory=list)
    dropped: list[DroppedEntry] = Field(default_factory=list)
    context_tokens: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost: int | float | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    text: str = ""
    effects: EffectsRecord = Field(default_factory=EffectsRecord)
    followup: list[str] = Field(default_factory=list)
    held: dict[str, TrackRecord] = Field(default_factory=dict)
    error: str | None = None
    stop_reason: str | None = None
    ended: str | None = None
    duration_ms: int | float | None = None
    model_ms: int | float | None = None
    tools_ms: int | float | None = None

    @property
    def tokens(self) -> int:
        """Every token the cycle's model calls used, input of all kinds and output."""
        u = self.usage
        return u.input_tokens + u.output_tokens + u.cache_write_tokens + u.cache_read_tokens

    @property
    def ended_tasks(self) -> set[str]:
        """The tasks the cycle completed or failed."""
        return {*self.effects.tasks_completed, *self.effects.tasks_failed}


class Interrupted(AuditRecord):
    """A cycle that started and never ended, marked by the next daemon."""

    event: Literal["interrupted"] = "interrupted"
    started_at: str | None = None
    tasks: list[str] = Field(default_factory=list)
    mail: list[str] = Field(default_factory=list)


class RomProblem(AuditRecord):
    """The agent's ROM became invalid: the last good configuration stays."""

    event: Literal["config_error"] = "config_error"
    error: str | None = None


class RomFixed(AuditRecord):
    """The ROM problem told of before is fixed."""

    event: Literal["config_fixed"] = "config_fixed"


class BudgetNotice(AuditRecord):
    """A person was told a budget is spent (`task:<id>` or `day:<date>`)."""

    event: Literal["budget"] = "budget"
    warned: str | None = None


class Reflection(AuditRecord):
    """Reflections written to long-term memory, or why none could be."""

    event: Literal["reflection"] = "reflection"
    written: list[dict[str, Any]] | None = None
    error: str | None = None


class UsageClamped(AuditRecord):
    """The endpoint's token figures were out of bounds and were clamped."""

    event: Literal["usage_clamped"] = "usage_clamped"
    note: str | None = None


class CycleFailed(AuditRecord):
    """A cycle ended by a bug (the daemon's outage handling writes it)."""

    event: Literal["error"] = "error"
    error: str | None = None


class OtherRecord(AuditRecord):
    """A line of a kind this version does not know: kept whole."""


_KINDS: dict[str, type[AuditRecord]] = {
    "cycle_start": CycleStart, "cycle": CycleRecord, "interrupted": Interrupted,
    "config_error": RomProblem, "config_fixed": RomFixed, "budget": BudgetNotice,
    "reflection": Reflection, "usage_clamped": UsageClamped, "error": CycleFailed,
}


def _kind(value: Any) -> str:
    event = value.get("event") if isinstance(value, dict) else getattr(value, "event", None)
    return event if isinstance(event, str) and event in _KINDS else "other"


AnyRecord = Annotated[
    Annotated[CycleStart, Tag("cycle_start")]
    | Annotated[CycleRecord, Tag("cycle")]
    | Annotated[Interrupted, Tag("interrupted")]
    | Annotated[RomProblem, Tag("config_error")]
    | Annotated[RomFixed, Tag("config_fixed")]
    | Annotated[BudgetNotice, Tag("budget")]
    | Annotated[Reflection, Tag("reflection")]
    | Annotated[UsageClamped, Tag("usage_clamped")]
    | Annotated[CycleFailed, Tag("error")]
    | Annotated[OtherRecord, Tag("other")],
    Discriminator(_kind),
]
RECORDS: TypeAdapter[AnyRecord] = TypeAdapter(AnyRecord)


def read_record(raw: dict[str, Any]) -> AnyRecord | None:
    """The record a line's JSON object holds; None if it fits no model (a hand-edited or
    foreign line: skipped, as a torn one is)."""
    try:
        return RECORDS.validate_python(raw)
    except ValidationError:
        return None
