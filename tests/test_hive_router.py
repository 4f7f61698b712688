"""The dispatcher's Router gives the same candidates as scoring each agent's skills
(`skill_score`) task by task, for every kind of task and team."""

from __future__ import annotations

import random

from hivemind.hive.models import Task
from hivemind.hive.tasks.routing import Router, candidates, skill_score, words
from hivemind.settings import AgentConfig

SKILLS = ["python", "tests", "docs", "rust", "Data Science", " sql ", "", "ops", "c++"]
TEXTS = ["fix the python tests", "write docs", "data science notebook", "SQL query",
         "deploy ops", "nothing relevant", "rust and python", "C++ build"]
DESCRIPTIONS = ["", "Writes Python tests and docs.", "Use for the rust build and ops.",
                "Expert in data science notebooks"]


def by_scores(task: Task, agents: list[AgentConfig]) -> list[str]:
    """The routing rule written out plainly, agent by agent."""
    if task.assignee:  # that agent, or nobody: the task waits for it
        return [task.assignee] if any(a.name == task.assignee for a in agents) else []
    text = words(f"{task.title} {task.body}")
    scored = [(skill_score(task, a, text), a.name) for a in agents
              if a.skills or a.description.strip()]
    best = max((s for s, _ in scored), default=0)
    if best > 0:
        return [n for s, n in scored if s == best]
    return [a.name for a in agents if a.accepts_unassigned]


def test_router_agrees_with_scoring_each_agent() -> None:
    rng = random.Random(7)
    for _ in range(300):
        agents = [
            AgentConfig(name=f"a{i}", skills=rng.sample(SKILLS, rng.randint(0, 3)),
                        description=rng.choice(DESCRIPTIONS),
                        accepts_unassigned=rng.random() < 0.5)
            for i in range(rng.randint(0, 6))
        ]
        task = Task(
            id="t", title=rng.choice(TEXTS), body=rng.choice(TEXTS),
            domain=rng.choice([None, "python", "Docs", "ops"]),
            task_type=rng.choice([None, "sql", "rust"]),
            assignee=rng.choice([None, "a0", "a3", "ghost"]),
        )
        assert Router(agents).candidates(task) == by_scores(task, agents), (task, agents)
        assert candidates(task, agents) == by_scores(task, agents)


def test_an_exact_domain_match_beats_a_word_match() -> None:
    agents = [AgentConfig(name="writer", skills=["docs"]),
              AgentConfig(name="coder", skills=["python"])]
    task = Task(id="t", title="python docs", domain="python")
    assert Router(agents).candidates(task) == ["coder"]


def test_nobody_skilled_falls_back_to_agents_that_accept_unassigned() -> None:
    agents = [AgentConfig(name="a", skills=["rust"], accepts_unassigned=False),
              AgentConfig(name="b", accepts_unassigned=True)]
    assert Router(agents).candidates(Task(id="t", title="bake bread")) == ["b"]
