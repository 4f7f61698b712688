"""What a block may cost in a context: each tier's share, one block's cap, its envelope.

CRITICAL blocks are always kept; HIGH, MEDIUM and LOW are kept while the running
total stays under 80 %, 90 % and 95 % of the budget. A block over its cap is
compressed by the builder, so it never counts as costing more. Around its text
each block has a JSON envelope (id, confidence, priority, metadata), estimated
here without rendering it.
"""

from __future__ import annotations

import json

from hivemind.memory.blocks import AnyBlock, Priority

# Share of the budget each tier may fill, in percent (integer maths: exact boundaries).
TIER_LIMITS: dict[Priority, int] = {Priority.HIGH: 80, Priority.MEDIUM: 90, Priority.LOW: 95}

# A block above this many tokens is compressed by the builder (MemoryCompressor's
# default), so the selector never counts it as costing more.
DEFAULT_MAX_BLOCK_TOKENS = 8000
# ...nor above this share of a small budget (a long task in an 8k context is shortened,
# not dropped), nor under this floor.
BLOCK_SHARE = 4  # a quarter
MIN_BLOCK_TOKENS = 200


def block_cap(budget: int, most: int | None = DEFAULT_MAX_BLOCK_TOKENS) -> int | None:
    """The most tokens one non-ROM block costs in a context of `budget`: a quarter of
    it, at most `most` (None: no compressor, no cap)."""
    if most is None:
        return None
    return min(most, max(MIN_BLOCK_TOKENS, budget // BLOCK_SHARE))


# The JSON around a block's content ({"id":…,"confidence":…,"priority":…,"metadata":{…}})
# measured 46-50 tokens plus ~1 per 4 characters of id and source path; each block
# type adds its own metadata (`envelope_extra`).
ENVELOPE_TOKENS = 48

# `json.dumps(metadata, default=str)`, without a new encoder per call.
_METADATA_JSON = json.JSONEncoder(default=str).encode


def envelope_tokens(block: AnyBlock, path: str | None) -> int:
    """Estimated tokens of the JSON around a block's content; `path`: its file, if any."""
    n = ENVELOPE_TOKENS + (len(block.id) + (len(path) if path else 0)) // 4
    n += block.envelope_extra()
    if block.metadata:
        n += len(_METADATA_JSON(block.metadata)) // 3
    return n
