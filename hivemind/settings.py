"""Settings people write: hive.toml tables and the settings a ROM.md front matter carries.

Every layer reads its settings from here (the daemon, the provider, pricing, the
long-term store, the agent), so no layer imports the file protocol for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hivemind.durations import Seconds
from hivemind.mcpspec import SERVER_NAME, TOOL_PREFIX, McpServerSpec

DEFAULT_MODEL = "claude-sonnet-5-5"

TOOL_NAMES = (
    "send_message", "read_file", "write_file", "edit_file", "list_files", "search_files",
    "create_task", "complete_task", "fail_task", "wait_for", "remember", "recall",
)
"""The tools a ROM's `tools:` may name (the registry's, in its order: a test keeps the
two the same)."""


class RetrievalWeights(BaseModel):
    """Weights of the long-term retrieval score (the README's "Long-term memory")."""

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(default=0.5, ge=0.0, description="relevance")
    beta: float = Field(default=0.3, ge=0.0, description="recency")
    gamma: float = Field(default=0.2, ge=0.0, description="importance")
    # 1.0: on bench/bench_learning.py the right lesson is followed in about half of the
    # later tasks (0.08 with 0); it ranks only what a task's goal has learned values for.
    delta: float = Field(default=1.0, ge=0.0, description="learned value for the task's goal")


class MemoryTiers(BaseModel):
    """Shares of an agent's memory room per tier, summing to 1 (what one leaves goes to the others)."""  # noqa: E501

    model_config = ConfigDict(extra="forbid", validate_by_name=True, serialize_by_alias=True)

    task: float = Field(default=0.4, ge=0.0, le=1.0, description="memories of the task in hand")
    project: float = Field(default=0.4, ge=0.0, le=1.0, description="of the task's project")
    # `global` is a Python keyword: the field is named for what it holds, given as `global`.
    global_: float = Field(default=0.2, ge=0.0, le=1.0, alias="global",
                           description="of the global tier, shared by every project")

    @model_validator(mode="after")
    def _sum_to_one(self) -> MemoryTiers:
        total = self.task + self.project + self.global_
        if abs(total - 1.0) > 0.005:
            raise ValueError(
                f"the shares must sum to 1: task {self.task:g} + project {self.project:g} + "
                f"global {self.global_:g} = {total:g} (give all three)"
            )
        return self


class TokenBudget(BaseModel):
    """Token allowances; None = unlimited."""

    model_config = ConfigDict(extra="forbid")

    per_day: int | None = Field(default=None, ge=1)
    per_task: int | None = Field(default=None, ge=1)


class AgentSettings(BaseModel):
    """Settings an agent may take from hive.toml `[agents]` and override in its ROM."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default=DEFAULT_MODEL, min_length=1)
    max_context_tokens: int = Field(default=100_000, ge=1_000)
    max_output_tokens: int = Field(default=4_096, ge=64)
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    heartbeat: Seconds = Field(
        default=0.0, ge=0.0, description="seconds (or 5m, 1h30m); 0 = events only")
    max_steps: int = Field(default=8, ge=1, le=100)
    budget: TokenBudget = Field(default_factory=TokenBudget)
    retrieval: RetrievalWeights = Field(default_factory=RetrievalWeights)
    memory_tiers: MemoryTiers = Field(default_factory=MemoryTiers)
    accepts_unassigned: bool = True
    # Held work: ceilings per task across its cycles, and the default loop limits.
    max_idle_turns: int = Field(
        default=2, ge=1, description="turns with no progress before a held task fails")
    max_rounds_per_task: int = Field(
        default=100, ge=1, description="model rounds a task may take, over all its cycles")
    max_tokens_per_task: int = Field(
        default=400_000, ge=1, description="tokens a task may use (a lower budget.per_task wins)")
    max_delegation_depth: int = Field(
        default=5, ge=0, description="create_task levels below a task dropped by a person")
    max_passes_per_agent: int = Field(
        default=2, ge=1, description="times one agent may hold the work of one root task")
    max_thread_messages: int = Field(
        default=10, ge=1, description="messages between two agents in a thread, no task ended")

    @field_validator("model", mode="before")
    @classmethod
    def _stripped(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value


MIN_CONTEXT_TOKENS = 1_000
"""The least context a request carries, whatever the ROM's token settings leave."""


class AgentConfig(AgentSettings):
    """An agent's ROM.md: front matter (settings) + body (instructions)."""

    # `skills: [3d, 2024]` in YAML gives numbers; people mean text.
    model_config = ConfigDict(extra="forbid", coerce_numbers_to_str=True)

    name: str
    role: str = ""
    description: str = Field(default="", description="when to use it (Claude Code's): routes "
                             "tasks as `skills` do, and tells the team what it does")
    enabled: bool = Field(
        default=True, description="false: paused, takes no task and no mail (see `hivemind "
        "pause` for a pause kept out of the ROM)")
    skills: list[str] = Field(default_factory=list)
    tools: list[str] | None = Field(default=None, description="allow-list; None = every tool")
    knowledge: list[str] = Field(default_factory=list, description="globs under knowledge/")
    watch: list[str] = Field(default_factory=list, description="globs of files to keep in view")
    mcp: dict[str, McpServerSpec] = Field(
        default_factory=dict, description="MCP servers whose tools it gets (see mcpspec)")
    instructions: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("skills", "knowledge", "watch", "tools", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @property
    def summary(self) -> str:
        """What it does, in a few words: its role, else the first sentence of its
        description (for the team list and `status`)."""
        first = self.description.strip().split(". ", 1)[0].split("\n", 1)[0].rstrip(".")
        return self.role or (first if len(first) <= 100 else first[:99] + "…")

    @property
    def finishes_tasks(self) -> bool:
        """False if its `tools:` allow neither complete_task nor fail_task: a task it
        took would never end, so it is given none."""
        return self.tools is None or not {"complete_task", "fail_task"}.isdisjoint(self.tools)

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str] | None) -> list[str] | None:
        # An MCP server's tools (mcp__<server>__<tool>, mcp__<server>: all of them) are
        # checked against `mcp:` below.
        unknown = [t for t in value or () if t not in TOOL_NAMES
                   and not (isinstance(t, str) and t.startswith(TOOL_PREFIX))]
        if unknown:
            raise ValueError(
                f"tools: no tool named {', '.join(unknown)} (the tools are "
                f"{', '.join(TOOL_NAMES)})"
            )
        return value

    @field_validator("mcp", mode="before")
    @classmethod
    def _server_names(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError("must map server names to their settings (command or url)")
        for name in value:
            if not isinstance(name, str) or not SERVER_NAME.match(name):
                raise ValueError(f"server name {name!r} must be letters, digits, - or _ "
                                 "(at most 40)")
        return value

    @model_validator(mode="after")
    def _mcp_tools_named(self) -> AgentConfig:
        for tool in self.tools or ():
            server = mcp_server_of(tool)
            if server is not None and server not in self.mcp:
                raise ValueError(f"tools: {tool} names no server of `mcp:` (its servers: "
                                 f"{', '.join(self.mcp) or 'none'})")
        return self

    def budget_warnings(self, fixed: int = 0) -> list[str]:
        """Token settings that are valid but do not do what they say (the agent runs);
        `fixed`: the tokens of the preamble and tool definitions, when known."""
        room = self.max_context_tokens - self.max_output_tokens - fixed
        if room >= MIN_CONTEXT_TOKENS:
            return []
        less = f"max_output_tokens {self.max_output_tokens}"
        if fixed:
            less += f" and the system prompt and tool definitions (about {fixed})"
        besides = "" if fixed else " (besides the system prompt and tool definitions)"
        return [
            f"max_context_tokens {self.max_context_tokens} less {less} leaves {room} tokens "
            f"for the context; it is kept to at least {MIN_CONTEXT_TOKENS:,} tokens{besides}, "
            "so requests will be larger than max_context_tokens: raise it or lower "
            "max_output_tokens"
        ]

    @field_validator("knowledge", "watch")
    @classmethod
    def _relative_globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            problem = _glob_problem(pattern)
            if problem:
                raise ValueError(f"{pattern!r} {problem}")
        return value


def mcp_server_of(tool: str) -> str | None:
    """The server of an allow-list entry `mcp__<server>__<tool>` or `mcp__<server>` (all
    its tools); None for a built-in tool's name."""
    if not tool.startswith(TOOL_PREFIX):
        return None
    return tool.removeprefix(TOOL_PREFIX).split("__", 1)[0]


def _glob_problem(pattern: str) -> str | None:
    """Why `pattern` is no glob of files inside the hive (None if it is one)."""
    if not pattern.strip():
        return "is empty: a pattern names files, like notes/*.md"
    if pattern.startswith(("/", "~")) or "\\" in pattern:
        return "must be relative to the hive, like notes/*.md"
    parts = pattern.split("/")
    if any(p in ("", ".", "..") for p in parts[:-1]) or parts[-1] in ("", ".", ".."):
        return "must name files inside the hive, without . or .. or empty parts"
    if any("**" in p and p != "**" for p in parts):
        return "uses ** inside a name: ** must be a whole part, like notes/**/*.md"
    return None


class DaemonSettings(BaseModel):
    """`[daemon]` of hive.toml."""

    model_config = ConfigDict(extra="forbid")

    max_concurrent_calls: int = Field(default=4, ge=1)
    rescan_interval: Seconds = Field(default=5.0, gt=0, description="seconds")
    settle_time: Seconds = Field(default=0.05, ge=0, description="seconds a file must be stable")
    grace_period: Seconds = Field(
        default=30.0, ge=0, description="seconds to finish cycles on stop")
    poll: bool = False
    loop_breaker: int = Field(default=3, ge=2, description="same tool call repeated N times")
    workers: int | Literal["auto"] = Field(
        default="auto",
        description="processes the agents are spread over (one core each); the model-call "
        "cap is shared among them, so it also caps their number. auto: one per core once "
        "the hive has more agents than one process keeps busy (16)",
    )

    @field_validator("workers", mode="before")
    @classmethod
    def _workers(cls, value: Any) -> Any:
        """One message for both forms, not one per member of the union."""
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)
                               and 1 <= value <= 64):
            return value
        raise ValueError('must be "auto" or a number of processes from 1 to 64')

    give_up_after: Seconds = Field(
        default=900.0, ge=0,
        description="seconds `run --until-idle` keeps waiting for a model service that is "
        "away (overloaded, unreachable), or for space on a full disk, before it stops, exit "
        "code 3",
    )
    fsync: bool = Field(
        default=True,
        description="flush every task move, delivery and audit line to disk; false keeps "
        "everything safe when the daemon is killed but not on a power loss, and is faster",
    )


class ProviderSettings(BaseModel):
    """`[provider]` of hive.toml: which model backend to use."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["auto", "anthropic", "offline"] = Field(
        default="auto", description="anthropic (auto: the same), or offline: no model is "
        "called, agents work mechanically and say so")
    base_url: str | None = Field(
        default=None, description="applies once you run `hivemind trust`; "
        "$ANTHROPIC_BASE_URL, when set, wins")

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https:// (got {value!r})")
        if value.rstrip("/").endswith("/v1"):
            raise ValueError(
                f"must not end with /v1 (got {value!r}): the client adds /v1/messages"
            )
        return value
    api_key_env: str = Field(
        default="ANTHROPIC_API_KEY",
        description="the variable sent as the key; another applies once you run `hivemind trust`")
    timeout: Seconds = Field(default=120.0, gt=0, description="seconds a model call may take")
    max_retries: int = Field(
        default=0, ge=0,
        description="the SDK's own quick retries inside one call; 0: the daemon retries "
        "with back-off itself, and the agent's wait shows in `hivemind status`",
    )


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float = Field(ge=0)
    cache_read: float = Field(ge=0)


DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-5-5": Price(input=15.0, output=75.0, cache_write=18.75, cache_read=1.5),
    "claude-sonnet-5-5": Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.3),
    "claude-haiku-5-5": Price(input=1.0, output=5.0, cache_write=1.25, cache_read=0.1),
}

DEFAULT_MODEL_ALIASES: dict[str, str] = {
    "opus": "claude-opus-5-5",
    "sonnet": "claude-sonnet-5-5",
    "haiku": "claude-haiku-5-5",
}
"""`model: sonnet` (as Claude Code agent files say it) and the id it stands for today."""


def resolve_model(model: str, aliases: Mapping[str, str]) -> str:
    """The model id `model` stands for: an alias of `aliases` (any case) or `model` itself."""
    return aliases.get(model) or aliases.get(model.lower()) or model


class MemorySettings(BaseModel):
    """`[memory]` of hive.toml: the long-term store."""

    model_config = ConfigDict(extra="forbid")

    max_items: int = Field(
        default=100_000,
        ge=10,
        description="memories per scope (a task, a project, the global tier); a write "
        "evicts from its own scope only, and is refused if nothing there may be evicted",
    )
    """Capacity per scope, never store-wide: one project's writes never evict another's."""
    reflection_threshold: float = Field(default=150.0, gt=0)
    reflect_offline: bool = Field(
        default=True,
        description="agents of the offline provider reflect by rule, without a model "
        "(false: they never reflect)",
    )
    share_of_budget: float = Field(default=0.15, ge=0.0, le=0.9)
    consolidate_importance: float = Field(default=0.7, ge=0.0, le=1.0)
    embeddings: Literal["auto", "off"] = Field(
        default="auto",
        description="agents also rank by sentence embeddings when an embeddings extra is "
        "installed (auto), or never (off)",
    )
    rating_share: float = Field(
        default=0.05, ge=0.0, le=0.5,
        description="share of an agent's tokens its model may spend rating the importance "
        "of its memories (0: keep the heuristic)",
    )


class HiveConfig(BaseModel):
    """hive.toml: hive-wide defaults; an agent's ROM front matter overrides `[agents]`."""

    model_config = ConfigDict(extra="forbid")

    agents: AgentSettings = Field(default_factory=AgentSettings)
    daemon: DaemonSettings = Field(default_factory=DaemonSettings)
    provider: ProviderSettings = Field(default_factory=ProviderSettings)
    models: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_MODEL_ALIASES))
    pricing: dict[str, Price] = Field(default_factory=lambda: dict(DEFAULT_PRICES))

    @field_validator("models")
    @classmethod
    def _over_the_built_in_aliases(cls, given: dict[str, str]) -> dict[str, str]:
        """`[models] fast = "claude-haiku-5-5"` adds an alias; the built-in ones stay."""
        for alias, model in given.items():
            if not alias.strip() or not model.strip():
                raise ValueError(f"{alias!r} = {model!r}: an alias and its model id are text, "
                                 'like sonnet = "claude-sonnet-5-5"')
        return {**DEFAULT_MODEL_ALIASES, **{a.strip().lower(): m.strip() for a, m in given.items()}}

    @field_validator("pricing")
    @classmethod
    def _over_the_built_in_prices(
        cls, given: dict[str, Price], info: ValidationInfo
    ) -> dict[str, Price]:
        """A `[pricing."<model>"]` table sets that model's price, `<model>` an id or an
        alias of `[models]` (the price is the id's); the other models keep theirs (one
        local model's price made every Claude model unpriced)."""
        aliases = info.data.get("models", DEFAULT_MODEL_ALIASES)
        priced: dict[str, Price] = {}
        named: dict[str, str] = {}
        for key, price in given.items():
            model = resolve_model(key, aliases)
            if model in named:
                raise ValueError(f"{named[model]!r} and {key!r} are the same model "
                                 f"({model}): give its price once")
            named[model] = key
            priced[model] = price
        return {**DEFAULT_PRICES, **priced}
    memory: MemorySettings = Field(default_factory=MemorySettings)
