"""TD(λ) value learning: which memories help reach which goal (seed 000).

Every retrieval during a task is one step: all eligibility traces of the task
decay by γ·λ and the memories just retrieved get a trace of 1 (replacing
traces). When the task ends the outcome is the terminal reward (done = 1,
failed = 0) and each traced memory's value for the goal moves toward it:
`V ← V + α·(r − V)·e`, clamped to 0..1. The values feed the δ term of retrieval.

A trace names its memory by `scopes.ref_key` (scope and id: two projects may use the
same id); a plain id, as traces were kept before scopes, names that id in any scope.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from hivemind.ltm.backend import MemoryBackend
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.scopes import parse_ref_key

_TRACE_FLOOR = 0.01  # traces below this are forgotten: they would barely move a value


@dataclass(frozen=True)
class TDParams:
    alpha: float = 0.3
    """Learning rate."""
    lam: float = 0.8
    """Trace decay λ."""
    gamma: float = 0.95
    """Discount γ between steps."""
    initial: float = 0.5
    """Value of a memory never scored for the goal."""

    def __post_init__(self) -> None:
        for name in ("alpha", "lam", "gamma", "initial"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"TD parameter {name} must be within 0..1")


def goal_of(domain: str | None, task_type: str | None) -> str:
    """The goal a value is learned for: `domain/task_type` (`general` for what is unset)."""
    return f"{domain or 'general'}/{task_type or 'general'}"


class ValueLearner:
    """Keeps each task's eligibility traces in the store; updates values at task end."""

    def __init__(self, backend: MemoryBackend, params: TDParams | None = None) -> None:
        self.backend = backend
        self.params = params or TDParams()

    def traces(self, task_id: str) -> dict[str, float]:
        """The current eligibility trace of each memory retrieved during the task."""
        raw = self.backend.meta_get(trace_key(task_id))
        return {str(k): float(v) for k, v in json.loads(raw).items()} if raw else {}

    def record_access(self, task_id: str, ids: Sequence[str]) -> dict[str, float]:
        """One step of the task: decay every trace, set the retrieved ones (`ref_key`s,
        or plain ids) to 1."""
        p = self.params
        traces = {i: e * p.gamma * p.lam for i, e in self.traces(task_id).items()}
        traces = {i: e for i, e in traces.items() if e >= _TRACE_FLOOR}
        traces.update(dict.fromkeys(ids, 1.0))
        self.backend.meta_set(trace_key(task_id), json.dumps(traces, sort_keys=True))
        return traces

    def end_task(self, task_id: str, goal: str, reward: float) -> dict[str, tuple[float, float]]:
        """Move each traced memory's value for `goal` toward `reward`; forget the traces."""
        p = self.params
        raw = self.backend.meta_get(trace_key(task_id))
        if raw is None:
            return {}  # nothing was retrieved during the task: nothing to learn or forget
        traces = {str(k): float(v) for k, v in json.loads(raw).items()}
        updates: dict[str, tuple[float, float]] = {}
        changed = []
        for key, record in self._traced(sorted(traces)):
            old = record.goal_values.get(goal, p.initial)
            new = min(1.0, max(0.0, old + p.alpha * (reward - old) * traces[key]))
            record.goal_values = {**record.goal_values, goal: round(new, 6)}
            changed.append(record)
            updates[record.id] = (old, new)
        if changed:
            self.backend.add_many(changed)
        self.backend.meta_set(trace_key(task_id), None)
        return updates

    def _traced(self, keys: Sequence[str]) -> list[tuple[str, MemoryRecord]]:
        """(trace key, its memory) for every traced memory still stored."""
        found: list[tuple[str, MemoryRecord]] = []
        for key in keys:
            scope, memory_id = parse_ref_key(key)
            found.extend((key, r) for r in self.backend.get_many([memory_id], scope=scope))
        return found

    def forget(self, task_id: str) -> None:
        """Drop a task's traces without learning from them."""
        if self.backend.meta_get(trace_key(task_id)) is not None:  # a read costs less
            self.backend.meta_set(trace_key(task_id), None)


def trace_key(task_id: str) -> str:
    """The meta key of a task's traces: it exists only while the task has some."""
    return f"traces:{task_id}"
