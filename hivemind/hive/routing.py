"""Which agent a pending task goes to: its assignee, else skills, else the least loaded."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from hivemind.hive.models import AgentConfig, Task

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


def candidates(task: Task, agents: Sequence[AgentConfig]) -> list[str]:
    """The agents that may take `task`, before load is considered (empty: nobody).

    1. the assignee, if that agent exists; 2. the agents with the best skills match;
    3. the agents with `accepts_unassigned`.
    """
    if task.assignee and any(a.name == task.assignee for a in agents):
        return [task.assignee]
    task_words = words(f"{task.title} {task.body}")
    scored = [(skill_score(task, a, task_words), a.name) for a in agents if a.skills]
    best = max((score for score, _ in scored), default=0)
    if best > 0:
        return [name for score, name in scored if score == best]
    return [a.name for a in agents if a.accepts_unassigned]


def least_loaded(names: Sequence[str], load: Mapping[str, int]) -> str | None:
    """Of `names`, the one with the fewest active tasks (ties: by name)."""
    return min(names, key=lambda n: (load.get(n, 0), n), default=None)


def route_task(
    task: Task, agents: Sequence[AgentConfig], load: Mapping[str, int] | None = None
) -> str | None:
    """The agent that should take `task`, or None if nobody may: of its `candidates`,
    the least loaded."""
    return least_loaded(candidates(task, agents), load or {})
