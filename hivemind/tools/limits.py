"""Default limits that cut loops between agents: delegation depth and hand-backs, and
long conversations between two agents (DESIGN §6: never only a budget).

A refusal is a tool error that tells the model to finish the work itself; it is kept
in the cycle's effects (the audit record) and in `recent` (status).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable

from hivemind.errors import ToolError
from hivemind.hive.models import Task, TaskLineage
from hivemind.settings import AgentConfig

REFUSALS_KEPT = 5  # the newest refusals an agent shows in status


def child_lineage(parent: Task, holder: str) -> TaskLineage:
    """The lineage of a task `holder` creates while holding `parent`."""
    up = parent.lineage
    if up is None:
        return TaskLineage(root=parent.id, parent=parent.id, depth=1, agents=[holder])
    return TaskLineage(root=up.root, parent=parent.id, depth=up.depth + 1,
                       agents=[*up.agents, holder])


def delegation_refusal(cfg: AgentConfig, lineage: TaskLineage, assignee: str | None) -> str | None:
    """Why a task of `lineage` for `assignee` may not be created (None: it may)."""
    if lineage.depth > cfg.max_delegation_depth:
        return (f"refused: this would be delegation level {lineage.depth} of task "
                f"{lineage.root} (max_delegation_depth={cfg.max_delegation_depth}); finish "
                "the work yourself, or fail_task with the reason")
    if assignee is not None and lineage.agents.count(assignee) >= cfg.max_passes_per_agent:
        return (f"refused: the work of task {lineage.root} has been with {assignee} "
                f"{lineage.agents.count(assignee)} times already (max_passes_per_agent="
                f"{cfg.max_passes_per_agent}); finish the work yourself, or fail_task with "
                "the reason")
    return None


def thread_key(thread: str | None, task: str | None, subject: str) -> str:
    """What a message is about, for counting: its thread, else its task, else its
    subject without the `Re:` prefixes."""
    if thread:
        return f"thread:{thread}"
    if task:
        return f"task:{task}"
    text = subject.strip()
    while text.lower().startswith("re:"):
        text = text[3:].strip()
    return f"subject:{text.lower()}"


class Conversations:
    """One agent's messages with each other agent, per thread, since a task ended (its
    own, or one whose end was mailed to it): a thread past the limit is cut."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.recent: deque[str] = deque(maxlen=REFUSALS_KEPT)

    def heard(self, sender: str, key: str) -> None:
        self.counts[(sender, key)] += 1

    def said(self, recipients: Iterable[str], key: str) -> None:
        for name in recipients:
            self.counts[(name, key)] += 1

    def task_ended(self) -> None:
        self.counts.clear()

    def refusal(self, cfg: AgentConfig, recipients: Iterable[str], key: str) -> str | None:
        """Why a message about `key` to `recipients` may not go (None: it may)."""
        limit = cfg.max_thread_messages
        for name in recipients:
            if self.counts[(name, key)] >= limit:
                return (
                    f"refused: {self.counts[(name, key)]} messages with {name} about "
                    f"{key.partition(':')[2] or key} and no task ended meanwhile "
                    f"(max_thread_messages={limit}); stop the exchange: finish the task "
                    "yourself (complete_task / fail_task), or wait_for what you need"
                )
        return None

    def refuse(self, why: str) -> ToolError:
        """The tool error of a refusal, remembered for status."""
        self.recent.append(why)
        return ToolError(why)
