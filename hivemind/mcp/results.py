"""A tool call's result as the model reads it: text, bounded, with a note of what was cut.

Text content is joined; an image, audio or binary resource is described in one line
(the model gets no bytes it cannot read); structured content, when there is no text,
becomes compact JSON. Only the first `max_chars` characters are ever assembled, so a
5 MB result is not copied whole again (what is past the cap is only counted).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import mcp_types as types

from hivemind.mcp.api import McpResult
from hivemind.printable import printable


def to_result(result: types.CallToolResult, max_chars: int) -> McpResult:
    """`result` as text of at most `max_chars` characters (and the cut note)."""
    return bounded(_pieces(result), max_chars, is_error=bool(result.is_error))


def bounded(pieces: Iterator[str], max_chars: int, *, is_error: bool = False) -> McpResult:
    """The pieces joined, kept to `max_chars` (control characters made visible); the
    rest counted, not kept."""
    kept: list[str] = []
    room = max_chars
    cut = 0
    for raw in pieces:
        piece = printable(raw) if room else raw  # past the cap it is only counted
        if room >= len(piece):
            kept.append(piece)
            room -= len(piece)
        else:
            if room:
                kept.append(piece[:room])
            cut += len(piece) - room
            room = 0
    text = "".join(kept)
    if cut:
        text += f"\n[... {cut} more characters cut]"
    elif not text:
        text = "(the tool returned nothing)"
    return McpResult(text, is_error=is_error, cut=cut)


def _pieces(result: types.CallToolResult) -> Iterator[str]:
    first = True
    for block in result.content:
        if not first:
            yield "\n"
        first = False
        yield from _block(block)
    if first and result.structured_content is not None:
        yield from _compact_json(result.structured_content)


def _block(block: types.ContentBlock) -> Iterator[str]:
    if isinstance(block, types.TextContent):
        yield block.text
    elif isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        yield f"[{kind}: {block.mime_type}, {_size(len(block.data) * 3 // 4)}, not shown]"
    elif isinstance(block, types.ResourceLink):
        about = f" — {block.description}" if block.description else ""
        yield f"[resource link: {block.uri} ({block.name}){about}]"
    elif isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            yield f"[resource {resource.uri}]\n"
            yield resource.text
        else:
            mime = resource.mime_type or "binary"
            yield f"[resource {resource.uri}: {mime}, {_size(len(resource.blob) * 3 // 4)}, " \
                  "not shown]"
    else:
        yield f"[{getattr(block, 'type', type(block).__name__)} content, not shown]"


def _compact_json(value: Any) -> Iterator[str]:
    # iterencode yields small chunks: a huge structure is never one more whole string.
    yield from json.JSONEncoder(separators=(",", ":"), ensure_ascii=False,
                                default=str).iterencode(value)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.0f} KB"
    return f"{n / (1024 * 1024):.1f} MB"
