"""Dispatch: route pending tasks to agents and claim them on their behalf.

One scan of tasks/ serves every agent (instead of each agent scanning), and
the claim itself is the board's atomic rename, so another process racing for
the same file simply wins or loses.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hivemind.hive.models import AgentConfig
from hivemind.hive.tasks import TaskBoard, TaskRef

MAX_ACTIVE_PER_AGENT = 4


@dataclass
class DispatchResult:
    claimed: Counter[str] = field(default_factory=Counter)
    waiting: list[tuple[str, str]] = field(default_factory=list)  # (task id, why)


class Dispatcher:
    """Routes claimable pending tasks to the running agents."""

    def __init__(self, board: TaskBoard, max_active: int = MAX_ACTIVE_PER_AGENT) -> None:
        self.board = board
        self.max_active = max_active

    def dispatch(self, agents: dict[str, AgentConfig]) -> DispatchResult:
        result = DispatchResult()
        if not agents:
            return result
        pending = self.board.scan_pending()
        if not pending:
            return result
        load = {name: len(self.board.active(name)) for name in agents}
        done = self.board.done_ids()
        configs = list(agents.values())
        claims: list[tuple[TaskRef, str]] = []
        for ref in pending:
            missing = [d for d in ref.task.depends_on if d not in done]
            if missing:
                result.waiting.append((ref.task.id, f"waits for {', '.join(missing)}"))
                continue
            target = self.board.route(ref, configs, load)
            if target is None or target not in agents:
                why = (f"assigned to {ref.task.assignee}, which is not running"
                       if ref.task.assignee else "no agent accepts it")
                result.waiting.append((ref.task.id, why))
                continue
            if load[target] >= self.max_active:
                result.waiting.append((ref.task.id, f"{target} is busy"))
                continue
            load[target] += 1
            claims.append((ref, target))
        # One batch: the claimed files' rewrites share their flushes to disk.
        for (_, target), got in zip(claims, self.board.claim_many(claims), strict=True):
            if got is not None:
                result.claimed[target] += 1
        return result
