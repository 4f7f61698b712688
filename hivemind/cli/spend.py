"""What agents spent: tokens and the estimated cost, in a run or since midnight (UTC, the
day budgets count by), read from the tail of their audit logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from hivemind.agent.audittail import read_last
from hivemind.agent.record import CycleRecord
from hivemind.hive.layout import Hive


@dataclass
class AgentSpend:
    """What one agent spent: cycles, tokens, estimated cost, and the models of its
    cycles that have no price (their tokens are not in the cost)."""

    tokens: int = 0
    cost: float = 0.0
    cycles: int = 0
    unpriced: set[str] = field(default_factory=set)
    priced: bool = False  # some cycle had a cost (the offline provider's have none)

    def add_record(self, rec: CycleRecord) -> None:
        """Count one cycle's record."""
        self.cycles += 1
        self.tokens += rec.tokens
        if rec.cost is not None:
            self.cost += float(rec.cost)
            self.priced = True
        elif rec.tokens and rec.provider not in (None, "offline"):
            self.unpriced.add(str(rec.as_json().get("model") or "a model"))

    def cost_text(self) -> str:
        """`$0.0123`, `$0.0123 + ?` (some tokens have no price), `-` (nothing priced)."""
        if not self.priced and not self.unpriced:
            return "-"
        return f"${self.cost:.4f}" + (" + ?" if self.unpriced else "")


def spend_today(
    hive: Hive, agents: list[str], now: datetime | None = None
) -> dict[str, AgentSpend]:
    """Each agent's spend since 00:00 UTC today, from its audit log (read from its end)."""
    start = (now or datetime.now(UTC)).astimezone(UTC).replace(hour=0, minute=0, second=0,
                                                               microsecond=0)
    out = {}
    for name in agents:
        spent = out[name] = AgentSpend()
        for rec in read_last(hive.audit_path(name), None, start).records:
            if isinstance(rec, CycleRecord):
                spent.add_record(rec)
    return out
