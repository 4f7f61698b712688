"""The loop breaker's count: which task repeats itself, round after round, making no progress.

Per task held (or, while none is held, per cycle): same tool, same input, same answer
is a repeat; a call the task never made, or whose answer changed, is new, and a round
with a new call is progress for it. Identical calls of one round are one call. A call
naming no task was made by the tasks the round's other calls name, or by every task
held when none is named; new, it is progress for every task held. A call counts 1 when
new, and one more in each round without progress for the task that repeats it; at
`loop_breaker` the task stops. So a task that made no call is never charged.
"""

from __future__ import annotations

from collections import Counter

from hivemind.agent.concerns import named_tasks
from hivemind.llm.base import ToolCall, ToolResult
from hivemind.tools.base import canonical_call

NO_TASK = "-"  # the key for calls made while no task is held


class LoopCounter:
    """Repeats per task held, across the rounds (and cycles) it is held."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}  # key → call → rounds repeated
        self.answers: dict[str, dict[str, int]] = {}  # key → call → hash of its last answer
        self.progressed: set[str] = set()  # tasks with a new call this cycle

    def start_cycle(self, held: list[str]) -> None:
        """Repeats count on only for the tasks still held."""
        self.counts = {k: v for k, v in self.counts.items() if k in held}
        self.answers = {k: v for k, v in self.answers.items() if k in held}
        self.progressed = set()

    def forget(self, key: str) -> None:
        self.counts.pop(key, None)
        self.answers.pop(key, None)

    def count_round(self, held: list[str], round_calls: list[tuple[ToolCall, ToolResult]],
                    limit: int) -> dict[str, str]:
        """Count one round (`held`: the tasks held as it began); each key whose repeat
        reached `limit`, with that call."""
        answer: dict[str, int] = {}  # call → its answer (the last, if it ran again)
        named: dict[str, list[str]] = {}  # call → the tasks it names
        for call, result in round_calls:
            canonical = canonical_call(call)
            answer[canonical] = hash((result.is_error, result.content))
            named[canonical] = named_tasks(call.input, held)
        in_round = {t for tasks in named.values() for t in tasks}
        tripped: dict[str, str] = {}
        for key in held or [NO_TASK]:
            concerned = [c for c, tasks in named.items() if key in tasks or not tasks]
            made = {c for c in concerned if key in named[c] or not in_round or key in in_round}
            answers = self.answers.setdefault(key, {})
            new = {c for c in concerned if answers.get(c) != answer[c]}
            counts = self.counts.setdefault(key, Counter())
            for c in concerned:
                answers[c] = answer[c]
                if c in new:  # its count starts again (at 1 if this task made it)
                    counts[c] = int(c in made)
                elif c in made and not new:  # a repeat in a round without progress
                    counts[c] += 1
                    if counts[c] >= limit:
                        tripped.setdefault(key, c)
            if new and key != NO_TASK:
                self.progressed.add(key)
        return tripped
