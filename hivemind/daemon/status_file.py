"""`.hivemind/status.json`: what a running daemon says of itself, one typed model
written by `dumps` (the daemon's `StatusWriter`) and read by `parse` (`hivemind status`).

The file is read from a hive, someone else's folder: every field has a default (a file
of an older version, or one a person wrote, reads), and keys this version does not know
are kept as they are.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

_READ = ConfigDict(extra="allow")


class AgentRunStatus(BaseModel):
    """One agent as the daemon runs it."""

    model_config = _READ

    state: str = ""  # "thinking", "idle", "error", "paused ...", "waiting for ..."
    paused_because: str | None = None  # why the model API refused it
    cycles: int = 0
    last_error: str | None = None
    config_error: str | None = None
    tokens_today: int = 0
    waiting: dict[str, str] = Field(default_factory=dict)  # held task -> what it waits for
    refused: list[str] = Field(default_factory=list)  # the latest loop limits' refusals


class WorkerStatus(BaseModel):
    """One worker process: its pid and agents, and how it ended if it died."""

    model_config = _READ

    pid: int | None = None
    agents: list[str] = Field(default_factory=list)
    running: bool = False
    ended: str | None = None


class WaitingTask(BaseModel):
    """A task no agent takes now, and why."""

    model_config = _READ

    id: str
    why: str


class RunTotalsStatus(BaseModel):
    """What this run did so far."""

    model_config = _READ

    cycles: int = 0
    errors: int = 0
    tool_calls: int = 0
    tasks_done: int = 0
    tasks_failed: int = 0
    usage: dict[str, int] = Field(default_factory=dict)  # token figures by kind
    cost_usd: float = 0.0
    unpriced_models: list[str] = Field(default_factory=list)
    cache_hit_share: float = 0.0
    overhead_ms_median: float | None = None


class McpServerStatus(BaseModel):
    """One MCP server of the daemon's pool (see `hivemind.mcp.api.ServerState`)."""

    model_config = _READ

    name: str = ""
    status: str = ""  # starting, ready, restarting, failed, stopped
    transport: str = ""  # stdio or http
    tools: int = 0  # tools it offers (before any allow-list)
    agents: list[str] = Field(default_factory=list)
    pid: int | None = None
    restarts: int = 0
    error: str | None = None  # its last problem, one line (why it failed)


class DaemonStatus(BaseModel):
    """The whole of status.json, in the order of its keys on disk."""

    model_config = _READ

    pid: int | None = None
    running: bool = False
    stopped_because: str | None = None
    provider: str | None = None
    started_at: str | None = None
    updated_at: str | None = None
    agents: dict[str, AgentRunStatus] = Field(default_factory=dict)
    workers: list[WorkerStatus] = Field(default_factory=list)
    waiting_tasks: list[WaitingTask] = Field(default_factory=list)
    disk_full: str | None = None  # why nothing is written now, while the disk is full
    totals: RunTotalsStatus = Field(default_factory=RunTotalsStatus)
    mcp_servers: list[McpServerStatus] = Field(default_factory=list)

    def dumps(self) -> str:
        """The file's text (the same bytes as the daemon's json.dumps always wrote)."""
        return json.dumps(self.model_dump(mode="json"), indent=2)

    @classmethod
    def parse(cls, data: Any) -> DaemonStatus:
        """Read the file's JSON value; a ValueError says which field is wrong and how."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the file"
            raise ValueError(f"{where}: {first['msg']}") from None
