"""Dispatch: route pending tasks to agents and claim them on their behalf.

One pending set serves every agent (instead of each agent scanning), kept up to
date from the watcher's events (`changed`; its periodic rescan turns whatever the
OS did not report into events) with a full listing of tasks/ now and then, so a
dispatch costs what changed, not the size of the board. Tasks are taken best
first and the walk stops once every agent is full. The claim itself is the board's
atomic rename, so another process racing for the same file simply wins or loses.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from hivemind.fs.sayonce import warn_once
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.ref import TaskRef
from hivemind.hive.tasks.routing import Router, least_loaded, unknown_assignee
from hivemind.settings import AgentConfig

logger = logging.getLogger("hivemind.daemon.daemon")  # said on the daemon's console

MAX_ACTIVE_PER_AGENT = 4
WAITING_SHOWN = 50  # reasons kept for status.json; the walk stops counting after that


@dataclass
class DispatchResult:
    claimed: Counter[str] = field(default_factory=Counter)
    waiting: list[tuple[str, str]] = field(default_factory=list)  # (task id, why)


class Dispatcher:
    """Routes claimable pending tasks to the running agents."""

    def __init__(self, board: TaskBoard, max_active: int = MAX_ACTIVE_PER_AGENT) -> None:
        self.board = board
        self.max_active = max_active
        # Each task's candidate agents, for one set of agent configs.
        self._routes: dict[Path, tuple[TaskRef, list[str]]] = {}
        self._configs_key: object = None
        self._router = Router([])
        self._hive_agents: frozenset[str] | None = None

    def dispatch(
        self, agents: dict[str, AgentConfig], changed: Iterable[Path] | None = None,
        away: Mapping[str, str] | None = None,
    ) -> DispatchResult:
        """Claim what can be claimed now. `changed`: the task files that changed since
        the last dispatch (None: list tasks/ whole). `away`: why agents of the hive that
        are not among `agents` take no work ("is paused: ..."), for the waiting list."""
        result = DispatchResult()
        self.board.refresh_pending(changed)
        if not agents:
            result.waiting = self._nobody_takes_work(away)
            return result
        configs = list(agents.values())
        key = tuple(
            (c.name, tuple(c.skills), c.accepts_unassigned) for c in configs
        )
        if key != self._configs_key:
            self._routes.clear()
            self._configs_key = key
            self._router = Router(configs)
        load = self.board.load()
        load = {name: load.get(name, 0) for name in agents}
        free = sum(max(0, self.max_active - n) for n in load.values())
        done: set[str] | None = None
        self._hive_agents = None  # listed once per dispatch, when a task names one
        claims: list[tuple[TaskRef, str]] = []
        for ref in self.board.pending_in_order():
            # A sub-task is claimed past the cap: the tasks waiting on it hold their
            # agents' places, and would wait for ever (delegation depth bounds it).
            # Sub-tasks come first in the order (`TaskRef.age_key`).
            sub = ref.task.lineage is not None
            if free <= 0 and not sub:
                if len(result.waiting) < WAITING_SHOWN:
                    result.waiting.append((ref.id, "every agent is busy"))
                    continue
                break
            if ref.task.depends_on:
                done = self.board.done_ids() if done is None else done
                missing = [d for d in ref.task.depends_on if d not in done]
                if missing:
                    self._wait(result, ref, f"waits for {', '.join(missing)}")
                    continue
            assignee = ref.task.assignee
            if assignee and assignee not in agents:
                self._wait(result, ref, self._assignee_away(ref, assignee, away))
                continue
            target = least_loaded(self._candidates(ref), load)
            if target is None:
                self._wait(result, ref, "no agent accepts it")
                continue
            if load[target] >= self.max_active and not sub:
                self._wait(result, ref, f"{target} is busy")
                continue
            load[target] += 1
            free -= 1
            claims.append((ref, target))
        for (_, target), got in zip(claims, self.board.claim_many(claims), strict=True):
            if got is not None:
                result.claimed[target] += 1
        if len(self._routes) > 4 * self.board.pending_count + 1024:
            self._routes = {p: r for p, r in self._routes.items() if self.board.is_pending(r[0])}
        return result

    def _nobody_takes_work(self, away: Mapping[str, str] | None) -> list[tuple[str, str]]:
        """The waiting list when no agent takes work: every pending task, and why."""
        why = "no agent runs"
        if away:
            why = "no agent is taking work: " + "; ".join(
                f"{name} {reason}" for name, reason in sorted(away.items())
            )
        return [(ref.id, why) for ref in islice(self.board.pending_in_order(), WAITING_SHOWN)]

    def _assignee_away(self, ref: TaskRef, assignee: str, away: Mapping[str, str] | None) -> str:
        """Why a task waits for its assignee, which is not running: an agent of the hive
        (`--agents`, a ROM without a valid config, paused), or a name the hive has no
        agent for (said on the console once per name: it waits until there is one)."""
        if self._in_hive(assignee):
            return f"assigned to {assignee}, which {(away or {}).get(assignee, 'is not running')}"
        why = unknown_assignee(ref.id, assignee)
        # Once per name, not per task: a typo in a batch of a thousand tasks is one line
        # (`hivemind status` lists each task).
        hive = self.board.hive
        warn_once(logger, (hive.root, "assignee", assignee), "%s and any other task assigned "
                  "to %s wait in tasks/: %s is no agent of this hive (add agents/%s/ROM.md, "
                  "or `hivemind task reassign ID AGENT`; `hivemind status` lists them)",
                  hive.relative(ref.path), assignee, assignee, assignee)
        return why

    def _in_hive(self, name: str) -> bool:
        """True if `name` is an agent of the hive (a folder of agents/ with a ROM.md)."""
        if self._hive_agents is None:
            self._hive_agents = frozenset(self.board.hive.agent_names())
        return name in self._hive_agents

    def _candidates(self, ref: TaskRef) -> list[str]:
        hit = self._routes.get(ref.path)
        if hit is not None and hit[0] is ref:
            return hit[1]
        names = self._router.candidates(ref.task)
        self._routes[ref.path] = (ref, names)
        return names

    @staticmethod
    def _wait(result: DispatchResult, ref: TaskRef, why: str) -> None:
        if len(result.waiting) < WAITING_SHOWN:
            result.waiting.append((ref.id, why))
