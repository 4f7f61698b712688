"""An MCP server as a ROM names it (the shape of Claude Code's `mcpServers`).

```yaml
mcp:
  notes:                          # the server's name: its tools are mcp__notes__<tool>
    command: python3              # stdio: command, args, env, cwd (hive-relative)
    args: [tools/notes_server.py]
    env: {NOTES_DIR: knowledge, TOKEN: "${GITHUB_TOKEN}"}
    tools: [lookup, list]         # allow-list; default: every tool it offers
    timeout: 30s                  # per call (default 60 s)
  search:
    url: http://127.0.0.1:8765/mcp   # streamable HTTP
```

A server is a program or an address chosen by whoever wrote the hive, so nothing here
starts or is contacted before the user trusts the hive (`hivemind trust`);
`fingerprint` is what that trust records. Environment values are passed only as
written, or named from the user's environment explicitly with `${VAR}`; the server
never gets the whole environment.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hivemind.durations import Seconds

SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
"""A server's name: part of its tools' names, `mcp__<server>__<tool>`."""

TOOL_PREFIX = "mcp__"
DEFAULT_TIMEOUT = 60.0
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpServerSpec(BaseModel):
    """One server of a ROM's `mcp:` block: a stdio command or a streamable-HTTP url."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = Field(default=None, min_length=1, description="stdio: the program")
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(
        default_factory=dict, description="as written, or ${VAR} from the user's environment")
    cwd: str | None = Field(default=None, description="hive-relative working directory")
    url: str | None = Field(default=None, description="streamable HTTP endpoint")
    headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers; values may use ${VAR}")
    tools: tuple[str, ...] | None = Field(
        default=None, description="allow-list of the server's tool names; None = all")
    timeout: Seconds = Field(default=DEFAULT_TIMEOUT, gt=0, description="seconds per call")

    @field_validator("args", "tools", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("env", "headers", mode="before")
    @classmethod
    def _text_values(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()}
        return value

    @field_validator("cwd")
    @classmethod
    def _relative_cwd(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = value.replace("\\", "/").split("/")
        if value.startswith(("/", "~")) or ".." in parts:
            raise ValueError(f"cwd {value!r} must be a folder inside the hive, like tools")
        return value

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"url {value!r} must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (HTTP), not "
                             + ("both" if self.command else "neither"))
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def fingerprint(self) -> str:
        """A digest of everything that decides what runs or is contacted (what trust
        records, and what tells a ROM edit that changes the server)."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def missing_vars(self, environ: Mapping[str, str]) -> list[str]:
        """The `${VAR}`s this server names that the user's environment lacks."""
        names = {m.group(1) for v in (*self.env.values(), *self.headers.values())
                 for m in _VAR.finditer(v)}
        return sorted(n for n in names if n not in environ)


def expand(value: str, environ: Mapping[str, str]) -> str:
    """`value` with each `${VAR}` replaced from `environ` (a missing one by "")."""
    return _VAR.sub(lambda m: environ.get(m.group(1), ""), value)


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: Claude Code's `mcp__<server>__<tool>`."""
    return f"{TOOL_PREFIX}{server}__{tool}"


def split_tool_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of an `mcp__<server>__<tool>` name; None for any other name."""
    if not name.startswith(TOOL_PREFIX):
        return None
    server, sep, tool = name.removeprefix(TOOL_PREFIX).partition("__")
    return (server, tool) if sep and server and tool else None


def parse_servers(value: Any) -> dict[str, McpServerSpec]:
    """A ROM's `mcp:` block, validated (pydantic errors name the server)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError("mcp: must map server names to their settings (command or url)")
    out: dict[str, McpServerSpec] = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not SERVER_NAME.match(name):
            raise ValueError(f"mcp: server name {name!r} must be letters, digits, - or _ "
                             "(at most 40)")
        if isinstance(spec, McpServerSpec):
            out[name] = spec
        elif isinstance(spec, Mapping):
            out[name] = McpServerSpec.model_validate(dict(spec))
        else:
            raise ValueError(f"mcp: server {name!r} needs settings (command or url)")
    return out
