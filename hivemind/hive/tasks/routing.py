"""Which agent a pending task goes to: its assignee (no other), else skills and
description, else the least loaded."""

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


_PLAIN = frozenset(words(
    "a an and or the of to in on at by for with from as is are be been it its this that "
    "these those your you any all each when whenever after before use used using must "
    "should can will not who what which proactively immediately agent specialist expert"
))
"""Words of a description that say nothing of what the agent is for."""

DESCRIPTION_WORDS_NEEDED = 2
"""Words a task must share with an agent's description for it to count (one word in
common, "code" say, is chance)."""


_EXAMPLES = re.compile(r"<example>.*?(?:</example>|$)|\bexamples?:", re.DOTALL | re.IGNORECASE)


@lru_cache(maxsize=1024)
def description_words(description: str) -> frozenset[str]:
    """The words of a description (Claude Code's `description:`) that a task may share;
    not those of its `<example>` dialogues, which would make a long one match anything."""
    said = _EXAMPLES.sub(" ", description)
    return frozenset(w for w in words(said) if w not in _PLAIN and len(w) > 2)


def _description_score(needed: frozenset[str], text: set[str]) -> int:
    shared = len(needed & text)
    return shared if shared >= DESCRIPTION_WORDS_NEEDED else 0


def skill_score(task: Task, agent: AgentConfig, task_words: set[str] | None = None) -> int:
    """2 per skill equal to the task's domain or task_type, 1 per skill named in its text,
    and 1 per word its text shares with the description (if it shares at least two)."""
    text = task_words if task_words is not None else words(f"{task.title} {task.body}")
    tags = {t.strip().lower() for t in (task.domain, task.task_type) if t}
    score = _description_score(description_words(agent.description), text)
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
        # (agent, its skills as (lower-case name, words), its description's words) for
        # agents that have skills or a description.
        self.skilled = [
            (a.name, [(n, _skill_words(n)) for s in a.skills if (n := s.strip().lower())],
             description_words(a.description))
            for a in agents if a.skills or a.description.strip()
        ]
        self.open = [a.name for a in agents if a.accepts_unassigned]
        self.servers = {a.name: frozenset(a.mcp) for a in agents if a.mcp}

    def candidates(self, task: Task) -> list[str]:
        """The agents that may take `task`, before load is considered (empty: nobody).

        1. the assignee, if that agent is among them (else nobody: the task waits for
        it); 2. for a task naming an MCP tool (`mcp: <server>.<tool>`), the agents whose
        ROMs name that server; 3. the agents with the best skills and description match
        (see `skill_score`); 4. the agents with `accepts_unassigned`.
        """
        if task.assignee:
            return [task.assignee] if task.assignee in self.names else []
        if task.mcp and (server := task.mcp.partition(".")[0]) and (
                named := [n for n, servers in self.servers.items() if server in servers]):
            return named
        text = words(f"{task.title} {task.body}")
        tags = {t.strip().lower() for t in (task.domain, task.task_type) if t}
        best, chosen = 0, []
        for name, skills, described in self.skilled:
            score = _description_score(described, text)
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
