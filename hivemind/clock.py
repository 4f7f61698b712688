"""The one clock every timestamp in hivemind reads: timezone-aware, UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Timezone-aware now; every timestamp in hivemind is UTC."""
    return datetime.now(UTC)
