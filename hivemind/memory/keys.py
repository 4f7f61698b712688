"""Hierarchical memory keys `{domain}:{task_type}:{content_hash}`, and blocks from actions.

The key dedups by content (same text, same hash) while keeping domains and task
types apart; the agent's name is metadata, never part of the key, so agents
share what they learn.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from hivemind.memory.blocks import FileBlock, HistoryBlock, MessageBlock, Priority

GENERAL = "general"
_HASH = re.compile(r"[0-9a-f]{16}")
_UNSAFE = re.compile(r"[\s:]+")
_RESULT_CHARS = 500
_PREVIEW_CHARS = 100


class MemoryKey(NamedTuple):
    domain: str
    task_type: str
    content_hash: str

    def __str__(self) -> str:
        return f"{self.domain}:{self.task_type}:{self.content_hash}"


def normalise_key_part(part: str | None) -> str:
    """Lower case, whitespace and colons as `_`; empty or None becomes `general`."""
    if part is None:
        return GENERAL
    cleaned = _UNSAFE.sub("_", part.lower()).strip("_")
    return cleaned or GENERAL


def content_hash(content: str) -> str:
    """First 16 hex digits of the MD5 of `content` (a dedup key, not security)."""
    data = content.encode("utf-8", "surrogatepass")
    return hashlib.md5(data, usedforsecurity=False).hexdigest()[:16]


def generate_memory_key(
    content: str, domain: str | None = None, task_type: str | None = None
) -> str:
    """`{domain}:{task_type}:{hash}`, with `general` for what is not given."""
    return f"{normalise_key_part(domain)}:{normalise_key_part(task_type)}:{content_hash(content)}"


def parse_memory_key(key: str) -> MemoryKey:
    """Split a key made by `generate_memory_key`; ValueError says what is wrong."""
    parts = key.split(":")
    if len(parts) != 3:
        raise ValueError(
            f"malformed memory key {key!r}: expected domain:task_type:hash"
            f" (3 parts separated by ':'), got {len(parts)} part(s)"
        )
    domain, task_type, digest = parts
    if not domain or not task_type:
        raise ValueError(f"malformed memory key {key!r}: domain and task_type must not be empty")
    if not _HASH.fullmatch(digest):
        raise ValueError(
            f"malformed memory key {key!r}: the hash must be 16 lower-case hex digits,"
            f" got {digest!r}"
        )
    return MemoryKey(domain, task_type, digest)


def _result_text(result: Any) -> str:
    text = result if isinstance(result, str) else json.dumps(result, sort_keys=True, default=str)
    return text if len(text) <= _RESULT_CHARS else text[: _RESULT_CHARS - 1] + "…"


def create_memory_from_action(
    action: str, result: Any
) -> FileBlock | list[MessageBlock] | HistoryBlock:
    """The block(s) an action leaves in working memory (seed 001, memory lifecycle).

    read_file → a HIGH FileBlock; check_mailbox → one unread MessageBlock per
    message; anything else → a HistoryBlock of the action and its result.
    """
    if action == "read_file" and isinstance(result, Mapping):
        return FileBlock(
            location=str(result["path"]),
            start_line=result.get("start_line"),
            end_line=result.get("end_line"),
            digest=result.get("digest"),
            priority=Priority.HIGH,
        )
    if action == "check_mailbox" and isinstance(result, Mapping):
        blocks: list[MessageBlock] = []
        for msg in result.get("messages", []):
            body = str(msg.get("content", msg.get("preview", "")))
            blocks.append(
                MessageBlock(
                    from_agent=str(msg.get("from", "unknown")),
                    to_agent=str(msg.get("to", "")),
                    subject=str(msg.get("subject", "")),
                    preview=body[:_PREVIEW_CHARS],
                    full_path=str(msg["path"]),
                    read=False,
                )
            )
        return blocks
    detail = ""
    if isinstance(result, Mapping) and "detail" in result:
        detail = str(result["detail"])
    return HistoryBlock(action=action, detail=detail, result=_result_text(result))
