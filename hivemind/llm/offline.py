"""The offline provider: deterministic tool calls, no network, no model.

It is not a fake intelligence. It reads the JSON context and drives the whole
pipeline (mail, files, tasks, cache accounting) so a hive runs and is tested
without an API key. Everything it writes says it comes from the offline provider.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hivemind.errors import ModelRequestError
from hivemind.llm.base import (
    AssistantTurn,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolSpec,
    Usage,
)
from hivemind.llm.offline_mcp import call_id, endings, mcp_call

LABEL = "[offline provider]"
SUBJECT_TAG = "[offline]"
NO_MODEL = "no model was called"
WRITTEN_BY = f"> Written by the offline provider ({NO_MODEL})."

# Senders never answered: the runtime's placeholder for an unknown sender.
_NO_REPLY_SENDERS = frozenset({"", "unknown"})
_UNSAFE_PATH_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def estimate_tokens(text: str) -> int:
    """The usual ~4 characters per token; good enough for offline accounting."""
    return len(text) // 4


def read_context(request: ModelRequest) -> list[dict[str, Any]]:
    """The JSON context's entries; a context that is not a JSON array is a bug upstream."""
    return _entries(request.context_json or "[]")


def _entries(text: str) -> list[dict[str, Any]]:
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelRequestError(f"offline provider: the context is not valid JSON: {e}") from e
    if not isinstance(entries, list):
        raise ModelRequestError("offline provider: the context is not a JSON array")
    return [entry for entry in entries if isinstance(entry, dict)]


class _ContextReader:
    """`read_context`, with each agent's stable part parsed once while it is unchanged.

    The stable part is an array's opening and its first entries (`[a,b`), the volatile
    part the rest (`,c]`, or `c]` / `]`): two arrays of their own, read apart. A split
    that does not read that way is read whole.
    """

    def __init__(self) -> None:
        self._stable: dict[str, tuple[str, list[dict[str, Any]]]] = {}

    def read(self, request: ModelRequest) -> list[dict[str, Any]]:
        stable, volatile = request.context_stable, request.context_volatile
        if not stable.startswith("[") or not volatile.endswith("]"):
            return read_context(request)
        if stable == "[" or volatile == "]":
            rest = volatile
        elif volatile.startswith(","):
            rest = volatile[1:]
        else:
            return read_context(request)
        try:
            head = self._head(request.agent, stable)
            tail = _entries("[" + rest)
        except ModelRequestError:
            return read_context(request)
        return [*head, *tail]

    def _head(self, agent: str, stable: str) -> list[dict[str, Any]]:
        known = self._stable.get(agent)
        if known is not None and known[0] == stable:
            return known[1]
        entries = _entries(stable + "]") if stable != "[" else []
        self._stable[agent] = (stable, entries)
        return entries


def _meta(entry: dict[str, Any]) -> dict[str, Any]:
    meta = entry.get("metadata")
    return meta if isinstance(meta, dict) else {}


def workspace_path(task_id: str) -> str:
    """`workspace/<task-id>.md`, with the id reduced to characters safe in a file name."""
    stem = _UNSAFE_PATH_CHARS.sub("-", task_id).strip(".-") or "task"
    return f"workspace/{stem}.md"


class _Plan:
    """The tool calls of a first round, built in context order."""

    def __init__(self, request: ModelRequest, entries: list[dict[str, Any]]) -> None:
        self.request = request
        self.entries = entries
        self.offered = {tool.name for tool in request.tools}
        self.calls: list[ToolCall] = []
        self.tasks = 0
        self.replies = 0
        rom = next((_meta(e) for e in entries if _meta(e).get("type") == "rom"), {})
        self.agent = request.agent or str(rom.get("agent") or "")
        # The runtime carries the ROM in the system prompt and its role in the request.
        role = request.role or str(rom.get("role") or "")
        self.role = role.strip() or "(not given)"

    def add(self, name: str, tool_input: dict[str, Any]) -> None:
        # A model can only call the tools it is offered; the offline provider neither.
        if name in self.offered:
            self.calls.append(
                ToolCall(id=f"offline-{len(self.calls) + 1}", name=name, input=tool_input)
            )

    def build(self) -> list[ToolCall]:
        for entry in self.entries:
            meta = _meta(entry)
            kind = meta.get("type")
            if kind == "task" and meta.get("status") == "active":
                self._task(entry, meta)
            elif kind == "message" and not meta.get("read", False):
                self._reply(str(entry.get("id") or ""), meta)
        return self.calls

    def _task(self, entry: dict[str, Any], meta: dict[str, Any]) -> None:
        task_id = str(meta.get("task_id") or entry.get("id") or "task")
        title = str(meta.get("title") or task_id)
        if self._mcp(entry, task_id):
            return
        path = workspace_path(task_id)
        writes = "write_file" in self.offered
        self.tasks += 1
        summary = f" A summary is in {path}." if writes else ""
        # To whoever asked, or `human`: never to itself (an agent may not mail itself).
        asked = str(meta.get("reply_to") or "")
        self.add(
            "send_message",
            {
                "to": asked if asked and asked != self.agent else "human",
                "subject": f"{SUBJECT_TAG} Ack: {title}",
                "body": (
                    f"Automatic acknowledgement from the offline provider ({NO_MODEL}): "
                    f"{self.agent} received task {task_id!r} ({title}).{summary}"
                ),
                "task": task_id,
            },
        )
        self.add("write_file", {"path": path, "content": self._summary(entry, task_id, title)})
        result = (
            f"The offline provider wrote {path} ({NO_MODEL})."
            if writes
            else f"Acknowledged by the offline provider ({NO_MODEL})."
        )
        self.add("complete_task", {"task_id": task_id, "result": result})

    def _mcp(self, entry: dict[str, Any], task_id: str) -> bool:
        """A task whose front matter says `mcp: <server>.<tool>`: call that tool (its
        result ends the task next round: see `offline_mcp`), or fail the task saying why
        it cannot be called. False for any other task."""
        wanted = mcp_call(str(entry.get("content") or ""))
        if wanted is None:
            return False
        self.tasks += 1
        if isinstance(wanted, str):
            problem = wanted
        elif wanted[0] in self.offered:
            self.calls.append(ToolCall(id=call_id(len(self.calls) + 1, task_id),
                                       name=wanted[0], input=wanted[1]))
            return True
        else:
            problem = (f"{wanted[0]} is not among this agent's tools: its ROM names no such "
                       "MCP server (mcp:), or the server is not trusted (`hivemind trust`) or "
                       "not ready (`hivemind status`)")
        self.add("fail_task", {"task_id": task_id, "reason": f"{LABEL} {problem}"})
        return True

    def _summary(self, entry: dict[str, Any], task_id: str, title: str) -> str:
        ids = self.request.context_ids or [str(e.get("id", "")) for e in self.entries]
        lines = [
            WRITTEN_BY,
            "",
            f"# {title}",
            "",
            f"- Agent: {self.agent}",
            f"- Role: {self.role}",
            f"- Task: {task_id}",
            f"- Context: {len(ids)} blocks, {self.request.context_tokens} tokens",
            "",
            "## Task",
            "",
            str(entry.get("content") or "(no text)").strip(),
            "",
            "## Blocks in context",
            "",
            *(f"- `{block_id}`" for block_id in ids),
            "",
        ]
        return "\n".join(lines)

    def _reply(self, entry_id: str, meta: dict[str, Any]) -> None:
        sender = str(meta.get("from") or "")
        subject = str(meta.get("subject") or "").strip()
        # Never answer another offline reply: two offline agents would ping-pong forever.
        if sender in _NO_REPLY_SENDERS or sender == self.agent or subject.startswith(SUBJECT_TAG):
            return
        self.replies += 1
        reply: dict[str, Any] = {
            "to": sender,
            "subject": f"{SUBJECT_TAG} Re: {subject or '(no subject)'}",
            "body": (
                f"Automatic reply from the offline provider ({NO_MODEL}): "
                f"{self.agent} received your message {subject or '(no subject)'!r}."
            ),
        }
        if entry_id:  # the entry's id names the mail
            reply["in_reply_to"] = entry_id
        if meta.get("task"):
            reply["task"] = str(meta["task"])
        self.add("send_message", reply)


class OfflineProvider:
    """Deterministic stand-in used when no API key is set; no network."""

    name = "offline"
    offline = True

    def __init__(self) -> None:
        # Per agent, the last cacheable prefix (tools, system, stable context): a repeat
        # is a cache read.
        self._last_prefix: dict[str, tuple[str, str, str]] = {}
        self._context = _ContextReader()
        # (ids of the specs, their JSON, the specs: kept alive so no id is reused)
        self._tools: tuple[tuple[int, ...], str, list[ToolSpec]] | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """First round: the calls for active tasks and unread mail; later rounds: done."""
        if request.turns:
            made = sum(len(t.tool_calls) for t in request.turns if isinstance(t, AssistantTurn))
            calls: list[ToolCall] = endings(request.turns, {t.name for t in request.tools})
            text = (f"{LABEL} ending {len(calls)} task(s) with their MCP results" if calls
                    else f"{LABEL} done: {_counted(made, 'tool call')}")
        else:
            plan = _Plan(request, self._context.read(request))
            calls = plan.build()
            if calls:
                text = (
                    f"{LABEL} {_counted(len(calls), 'tool call')} for "
                    f"{_counted(plan.tasks, 'active task')} and "
                    f"{_counted(plan.replies, 'unread message')} ({NO_MODEL})"
                )
            else:
                text = f"{LABEL} nothing to do: no active task, no mail to answer ({NO_MODEL})"
        return ModelResponse(
            text=text,
            tool_calls=calls,
            stop_reason="tool_use" if calls else "end_turn",
            usage=self._usage(request, text, calls),
            model="offline",
            provider=self.name,
        )

    def _tools_json(self, tools: list[ToolSpec]) -> str:
        """The tool definitions as JSON, dumped once while the same specs come back."""
        key = tuple(id(t) for t in tools)
        if self._tools is None or self._tools[0] != key:
            self._tools = (key, json.dumps([t.model_dump() for t in tools], sort_keys=True), tools)
        return self._tools[1]

    def _usage(self, request: ModelRequest, text: str, calls: list[ToolCall]) -> Usage:
        tools = self._tools_json(request.tools)
        overhead = estimate_tokens(request.system + tools)
        total = request.context_tokens + overhead
        # The cached prefix is tools → system → stable context, as the API caches it.
        prefix = (tools, request.system, request.context_stable)
        cached = min(overhead + estimate_tokens(request.context_stable), total)
        hit = self._last_prefix.get(request.agent) == prefix
        self._last_prefix[request.agent] = prefix
        written = len(json.dumps([c.input for c in calls])) if calls else 0
        return Usage(
            input_tokens=total - cached,
            output_tokens=8 + estimate_tokens(text) + written // 4,
            cache_write_tokens=0 if hit else cached,
            cache_read_tokens=cached if hit else 0,
        )

    async def aclose(self) -> None:
        """Nothing to release."""


def _counted(n: int, thing: str) -> str:
    """`1 active task`, `2 active tasks`."""
    return f"{n} {thing}{'' if n == 1 else 's'}"
