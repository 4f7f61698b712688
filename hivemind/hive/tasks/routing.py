"""Which agent a pending task goes to: its assignee (no other), else skills, else the
least loaded."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from hivemind.hive.models import Task
from hivemind.settings import AgentConfig

_WORD = re.compile(r"[a-z0-9][a-z0-9+#]*")


def _stem(word: str) -> str:
    # "tests" matches the skill "test"; a crude plural rule is enough for routing.
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def words(text: str) -> set[str]:
    """Lower-case words of `text`, plural `s` removed."""
    return {_stem(w) for w in _WORD.findall(text.lower())}


@lru_cache(maxsize=1024)
def _skill_words(skill: str) -> frozenset[str]:
    """A skill's words: the same few skills are matched against every pending task."""
    return frozenset(words(skill))


def skill_score(task: Task, agent: AgentConfig, task_words: set[str] | None = None) -> int:
    """2 per skill equal to the task's domain or task_type, 1 per skill named in its text."""
    text = task_words if task_words is not None else words(f"{task.title} {task.body}")
    tags = {t.strip().lower() for t in (task.domain, task.task_type) if t}
    score = 0
    for skill in agent.skills:
        name = skill.strip().lower()
        if not name:
            continue
        if name in tags:
            score += 2
        elif (needed := _skill_words(name)) and needed <= text:
            score += 1
    return score


class Router:
    """`candidates` for one set of agents, their skills prepared once (the dispatcher
    routes every pending task against the same agents)."""

    def __init__(self, agents: Sequence[AgentConfig]) -> None:
        self.names = {a.name for a in agents}
        # (agent, its skills as (lower-case name, words)) for agents that have skills.
        self.skilled = [
            (a.name, [(n, _skill_words(n)) for s in a.skills if (n := s.strip().lower())])
            for a in agents if a.skills
        ]
        self.open = [a.name for a in agents if a.accepts_unassigned]

    def candidates(self, task: Task) -> list[str]:
        """The agents that may take `task`, before load is considered (empty: nobody).

        1. the assignee, if that agent is among them (else nobody: the task waits for
        it); 2. the agents with the best skills match (see `skill_score`); 3. the agents
        with `accepts_unassigned`.
        """
        if task.assignee:
            return [task.assignee] if task.assignee in self.names else []
        text = words(f"{task.title} {task.body}")
        tags = {t.strip().lower() for t in (task.domain, task.task_type) if t}
        best, chosen = 0, []
        for name, skills in self.skilled:
            score = 0
            for skill, needed in skills:
                if skill in tags:
                    score += 2
                elif needed and needed <= text:
                    score += 1
            if score > best:
                best, chosen = score, [name]
            elif score == best and score > 0:
                chosen.append(name)
        return chosen if best > 0 else list(self.open)


def candidates(task: Task, agents: Sequence[AgentConfig]) -> list[str]:
    """The agents that may take `task`, before load is considered (see `Router`)."""
    return Router(agents).candidates(task)


def unknown_assignee(task_id: str, assignee: str) -> str:
    """Why a task assigned to a name the hive has no agent for waits, and what to do."""
    return (f"assigned to {assignee}, which is no agent of this hive: it waits in tasks/ "
            f"until agents/{assignee}/ROM.md exists or it is given to another agent "
            f"(hivemind task reassign {task_id} AGENT)")


def least_loaded(names: Sequence[str], load: Mapping[str, int]) -> str | None:
    """Of `names`, the one with the fewest active tasks (ties: by name)."""
    return min(names, key=lambda n: (load.get(n, 0), n), default=None)


def route_task(
    task: Task, agents: Sequence[AgentConfig], load: Mapping[str, int] | None = None
) -> str | None:
    """The agent that should take `task`, or None if nobody may: of its `candidates`,
    the least loaded."""
    return least_loaded(candidates(task, agents), load or {})
