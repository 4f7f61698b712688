"""A memory's scope: the one task, project or global tier it belongs to.

A memory's identity is its scope plus its id: `D1:1` of project p26 and `D1:1` of
project p30 are two memories. Writes, imports and evictions scoped to one of them
never touch the other. A scope is kept as one string (the `scope` column):

    global                      the global tier
    project:p26                 project p26
    task:["p26","t1"]           task t1 of project p26 (["", "t1"]: of no project)
"""

from __future__ import annotations

import json
from collections.abc import Iterable

GLOBAL_SCOPE = "global"

MemoryRef = tuple[str, str]
"""(scope, id): one memory, whichever other scopes use the same id."""


def scope_key(tier: str, project: str | None, task_id: str | None) -> str:
    """The scope of a memory of `tier` ("task", "project" or "global"; a `Tier` will do)."""
    if tier == "global":
        return GLOBAL_SCOPE
    if tier == "project":
        return f"project:{project or ''}"
    pair = json.dumps([project or "", task_id or ""], ensure_ascii=False, separators=(",", ":"))
    return f"task:{pair}"


def describe_scope(scope: str) -> str:
    """A scope in words: `project p26`, `task t1 of project p26`, `global`."""
    kind, _, rest = scope.partition(":")
    if kind == "project":
        return f"project {rest}"
    if kind == "task":
        try:
            project, task_id = json.loads(rest)
        except (ValueError, TypeError):
            return scope
        return f"task {task_id}" + (f" of project {project}" if project else "")
    return scope


def ref_key(ref: MemoryRef) -> str:
    """A `MemoryRef` as one string (a key of the stored eligibility traces)."""
    return json.dumps(list(ref), ensure_ascii=False, separators=(",", ":"))


def parse_ref_key(key: str) -> tuple[str | None, str]:
    """(scope, id) of a `ref_key`; a plain id (traces written before scopes) is (None, id)."""
    if key.startswith('["'):
        try:
            scope, memory_id = json.loads(key)
        except (ValueError, TypeError):
            return None, key
        if isinstance(scope, str) and isinstance(memory_id, str):
            return scope, memory_id
    return None, key


def by_scope(refs: Iterable[MemoryRef]) -> dict[str, list[str]]:
    """The ids of `refs` grouped by scope, in order, each id once per scope."""
    groups: dict[str, dict[str, None]] = {}
    for scope, memory_id in refs:
        groups.setdefault(scope, {})[memory_id] = None
    return {scope: list(ids) for scope, ids in groups.items()}
