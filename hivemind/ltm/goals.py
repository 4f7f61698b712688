"""The goal of a task: its `domain` and `task_type` (seed 000's hierarchical keys).

The goal labels what a task stores (`remember`, its history at its end) and names the
learned value (TD(λ), `learning.py`) that ranks memories while it runs. A task's front
matter may give both; what it leaves out is inferred, in this order:

- **domain**: the first of the agent's ROM `skills` (in the ROM's order) that the
  task's title or body (its first 4,000 characters) names, as whole words in any case
  (`skills: [billing, sql]` and "Refund the double billing of ACME" → `billing`); none
  named: unset.
- **task_type**: the first word of the title, else of the body, that is one of the
  kinds in `TASK_TYPES` or a form of it ("Fixing the export" → `fix`, "a summary of"
  → `summarise`); none: unset.

Neither given nor inferred: the task has no goal (nothing is learned from it). One
of the two: the other is `general` in the goal's name (`billing/general`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hivemind.hive.models import Task
from hivemind.ltm.learning import goal_of

TASK_TYPES: dict[str, tuple[str, ...]] = {
    "fix": ("fix", "bug", "bugfix", "repair", "debug", "patch", "hotfix"),
    "review": ("review", "proofread", "audit", "critique", "assess"),
    "write": ("write", "draft", "compose", "document", "rewrite", "edit"),
    "summarise": ("summarise", "summarize", "summary", "digest", "recap", "condense"),
    "research": ("research", "investigate", "explore", "find", "compare", "survey"),
    "plan": ("plan", "schedule", "design", "outline", "roadmap"),
    "test": ("test", "verify", "validate", "qa"),
    "deploy": ("deploy", "release", "ship", "rollout", "rollback", "migrate", "upgrade"),
    "analyse": ("analyse", "analyze", "analysis", "measure", "profile", "benchmark"),
    "translate": ("translate", "translation", "localise", "localize"),
    "refactor": ("refactor", "restructure", "cleanup", "simplify"),
    "answer": ("answer", "reply", "respond", "explain"),
}
"""A task's kind and the words (and their -s, -es, -ed, -ing forms) that say it."""

BODY_CHARS = 4_000
"""How much of a task's body the inference reads."""

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_KIND_OF: dict[str, str] = {word: kind for kind, words in TASK_TYPES.items() for word in words}


@dataclass(frozen=True)
class Goal:
    """A task's domain and kind, as given or inferred (None: neither)."""

    domain: str | None = None
    task_type: str | None = None

    @property
    def key(self) -> str | None:
        """`domain/task_type` as learned values are kept (None: no goal, nothing learned)."""
        if self.domain is None and self.task_type is None:
            return None
        return goal_of(self.domain, self.task_type)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _kind(word: str) -> str | None:
    """The task kind `word` (lower case) is a form of, if any."""
    if word in _KIND_OF:
        return _KIND_OF[word]
    for ending in ("ing", "es", "ed", "s", "d"):
        stem = word.removesuffix(ending)
        if stem != word and len(stem) >= 2:
            for candidate in (stem, stem + "e", stem[:-1] if stem[-1:] == stem[-2:-1] else stem):
                if candidate in _KIND_OF:
                    return _KIND_OF[candidate]
    return None


def infer_task_type(title: str, body: str) -> str | None:
    """The first word of `title`, else of `body`, that says a task kind."""
    for text in (title, body):
        for word in _words(text):
            kind = _kind(word)
            if kind is not None:
                return kind
    return None


def infer_domain(title: str, body: str, skills: Sequence[str]) -> str | None:
    """The first of `skills` that `title` or `body` names as whole words (any case)."""
    said = " " + " ".join(_words(f"{title}\n{body}")) + " "
    for skill in skills:
        words = _words(skill)
        if words and f" {' '.join(words)} " in said:
            return skill.strip()
    return None


def task_goal(task: Task, skills: Sequence[str] = ()) -> Goal:
    """The goal of `task` for an agent with `skills`: its front matter's, else inferred
    (from its title and the start of its body: every cycle asks)."""
    body = task.body[:BODY_CHARS]
    domain = (task.domain or "").strip() or infer_domain(task.title, body, skills)
    task_type = (task.task_type or "").strip() or infer_task_type(task.title, body)
    return Goal(domain, task_type)


def labels_filter(domain: str | None, task_type: str | None) -> dict[str, Any]:
    """The filter keeping only memories of `domain` and `task_type` (each if given)."""
    out: dict[str, Any] = {}
    if domain is not None:
        out["domain"] = domain
    if task_type is not None:
        out["task_type"] = task_type
    return out
