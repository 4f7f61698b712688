"""`LongTermMemory`: the one object the agent loop and the CLI use (DESIGN §5).

Scopes: a *task* memory lives until its task ends, a *project* memory is seen
only by that project, a *global* memory by everyone — except a global
preference, which waits as `proposed` (and is never retrieved) until a person
runs `hivemind memory approve ID`. A memory's identity is its scope plus its id,
and capacity is per scope: no write, import or eviction of one scope changes,
moves or evicts a memory of another. Every call returns what the audit log needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from hivemind.errors import UserError
from hivemind.hive.layout import Hive
from hivemind.ltm import retention
from hivemind.ltm.approval import initial_status, tell_person
from hivemind.ltm.backend import Filters, MemoryBackend, counting
from hivemind.ltm.embeddings import Embedder
from hivemind.ltm.goals import labels_filter
from hivemind.ltm.importance import heuristic_importance, scale_points
from hivemind.ltm.importing import import_lines
from hivemind.ltm.jsonl import ImportSummary, export_line
from hivemind.ltm.learning import TDParams, ValueLearner
from hivemind.ltm.records import (
    MemoryKind,
    MemoryRecord,
    MemoryStatus,
    ScoredMemory,
    TaskEndReport,
    Tier,
    is_blank,
    summary,
    utcnow,
)
from hivemind.ltm.reflection import (
    MEMORIES_PER_QUESTION,
    RECENT_MEMORIES,
    REFLECTION_IMPORTANCE,
    ImportanceCounter,
    Reflector,
    reflect,
)
from hivemind.ltm.retrieval import RetrievalTuning, Retriever, fit_budget
from hivemind.ltm.scopes import GLOBAL_SCOPE, by_scope, describe_scope, ref_key, scope_key
from hivemind.ltm.sqlite import SQLiteBackend
from hivemind.ltm.taskend import TaskEnd
from hivemind.memory.blocks import HistoryBlock
from hivemind.memory.keys import generate_memory_key
from hivemind.settings import MemorySettings, MemoryTiers, RetrievalWeights

Scope = Literal["task", "project", "global"]


def scope_filter(project: str | None, task_id: str | None) -> Filters:
    """What a caller on `project` / `task_id` may see: active memories of its task (of
    that project), its project and the global tier. Every retrieval goes through it."""
    visible = [GLOBAL_SCOPE]
    if project:
        visible.append(scope_key(Tier.PROJECT, project, None))
    if task_id:
        visible.append(scope_key(Tier.TASK, project, task_id))
    return {"status": MemoryStatus.ACTIVE, "scope": {"$in": visible}}


class LongTermMemory:
    """The shared long-term store of a hive (or of any database file)."""

    def __init__(
        self,
        hive_or_db_path: Hive | Path | str | MemoryBackend,
        settings: MemorySettings | None = None,
        weights: RetrievalWeights | None = None,
        embedder: Embedder | None = None,
        *,
        tuning: RetrievalTuning | None = None,
        td: TDParams | None = None,
        policy: retention.RetentionPolicy | None = None,
    ) -> None:
        self.hive = hive_or_db_path if isinstance(hive_or_db_path, Hive) else None
        if isinstance(hive_or_db_path, Hive):
            self.backend: MemoryBackend = SQLiteBackend(hive_or_db_path.memory_db)
        elif isinstance(hive_or_db_path, Path | str):
            self.backend = SQLiteBackend(hive_or_db_path)
        else:
            self.backend = hive_or_db_path
        # A backend handed in belongs to the caller, who closes it.
        self._owns_backend = not isinstance(hive_or_db_path, MemoryBackend)
        self.settings = settings or MemorySettings()
        self.embedder = embedder
        self.retriever = Retriever(self.backend, weights or RetrievalWeights(), tuning, embedder)
        self.learner = ValueLearner(self.backend, td)
        self.counter = ImportanceCounter(self.backend)
        self.policy = policy or retention.RetentionPolicy()
        self.task_end = TaskEnd(self.backend, self.settings, self.learner, self.policy,
                                self.remember, self.hive)

    def __enter__(self) -> LongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------------
    def remember(
        self,
        content: str,
        *,
        agent: str,
        scope: Scope,
        project: str | None = None,
        task_id: str | None = None,
        importance: float | None = None,
        domain: str | None = None,
        task_type: str | None = None,
        tags: Sequence[str] = (),
        preference: bool = False,
        kind: MemoryKind = MemoryKind.EPISODIC,
        source_ids: Sequence[str] = (),
        at: datetime | None = None,
        needs_approval: bool | None = None,
        tell: bool = True,
    ) -> MemoryRecord:
        """Store one memory (or refresh the identical one already in that scope).
        `MemoryFullError` if the scope is full and holds nothing it may evict.

        A global one waits for a person (`approval.initial_status`: `needs_approval`
        True for work of no project, False for a person's own act); `tell` mails them."""
        tier = _tier(scope, project, task_id)
        text = content.strip()
        if is_blank(text):
            raise UserError("a memory needs some text (it is empty, or only invisible characters)")
        if importance is not None and not 0.0 <= importance <= 1.0:
            raise UserError(f"importance must be between 0 and 1 (got {importance})")
        now = at or utcnow()
        status = initial_status(tier, preference, needs_approval)
        key = generate_memory_key(text, domain, task_type)
        home = scope_key(tier, project, task_id if tier is Tier.TASK else None)
        existing = self.backend.query({"key": key, "scope": home}, limit=1)
        if existing and existing[0].preference == preference:
            same = existing[0]
            same.importance = max(same.importance, importance or 0.0)
            same.last_accessed = now
            same.access_count += 1
            if needs_approval is False:  # a person's own act approves what waited
                same.status = MemoryStatus.ACTIVE
            self.backend.add(same)
            return same
        record = MemoryRecord(
            key=key, content=text, kind=kind, tier=tier,
            project=project if tier is not Tier.GLOBAL else None,
            agent=agent, task_id=task_id, domain=domain, task_type=task_type, tags=list(tags),
            importance=heuristic_importance(text) if importance is None else importance,
            importance_by="heuristic" if importance is None else "given",
            created_at=now, last_accessed=now, source_ids=list(source_ids),
            preference=preference, status=status,
        )  # fmt: skip
        retention.check_room(self.backend, home, self.settings.max_items)
        [record] = self._embedded([record])
        self.backend.add(record)
        if kind is MemoryKind.EPISODIC:
            self.counter.add(agent, project, scale_points(record.importance))
        if tell:
            tell_person(self.hive, [record])
        self._enforce_limits(agent, home, now)
        return record

    def approve(self, memory_id: str) -> MemoryRecord:
        """Activate a proposed global preference (a person's decision)."""
        found = self.backend.get_many([memory_id])
        if not found:
            raise UserError(f"no memory with id {memory_id!r}")
        proposed = [r for r in found if r.status is MemoryStatus.PROPOSED]
        record = proposed[0] if proposed else found[0]
        if record.status is not MemoryStatus.PROPOSED:
            raise UserError(
                f"memory {memory_id!r} is not waiting for approval (it is {record.status.value})"
            )
        record.status = MemoryStatus.ACTIVE
        self.backend.add(record)
        return record

    # -- reading -----------------------------------------------------------------
    def recall(
        self,
        query: str,
        *,
        agent: str,
        project: str | None = None,
        task_id: str | None = None,
        k: int = 10,
        at: datetime | None = None,
        goal: str | None = None,
        record_access: bool = True,
        weights: RetrievalWeights | None = None,
        domain: str | None = None,
        task_type: str | None = None,
    ) -> list[ScoredMemory]:
        """The `k` best memories for `query` that `project`/`task_id` may see, best first,
        ranked with `weights` (the agent's; default: the store's), only those of `domain`
        and `task_type` if given. Records the access (recency, access count, TD trace)
        unless `record_access=False`."""
        now = at or utcnow()
        if self._empty():
            return []  # nothing to find: no search (every cycle recalls, most hives start empty)
        where = {**scope_filter(project, task_id), **labels_filter(domain, task_type)}
        found = self.retriever.retrieve(query, where, k=k, at=now, goal=goal, weights=weights)
        if record_access:
            self._accessed(found, task_id, now)
        return found

    def _empty(self) -> bool:
        """True if the store holds no memory at all, by the backend's own count (one
        PRAGMA while it is known); False when the backend keeps no counts."""
        return counting(self.backend) is not None and self.backend.count() == 0

    def context_for(
        self,
        query: str,
        *,
        agent: str,
        project: str | None,
        task_id: str | None,
        max_tokens: int,
        count_tokens: Callable[[str], int],
        at: datetime | None = None,
        goal: str | None = None,
        touch: bool = True,
        weights: RetrievalWeights | None = None,
        shares: MemoryTiers | None = None,
    ) -> list[ScoredMemory]:
        """Memories for the prompt within `max_tokens` (the memory share of the budget),
        ranked with `weights`: each tier first within its share of `shares` (default 40 %
        task, 40 % project, 20 % global), then a tier's unused share goes to the others.
        `touch=False` (a look, as `hivemind inspect` takes) records no access."""
        now = at or utcnow()
        ranked = self.recall(
            query, agent=agent, project=project, task_id=task_id, k=50, at=now, goal=goal,
            record_access=False, weights=weights,
        )  # fmt: skip
        tiers = (shares or MemoryTiers()).model_dump()
        split = {Tier(tier): share for tier, share in tiers.items()}
        picked = fit_budget(ranked, max_tokens, count_tokens, split)
        if touch:
            self._accessed(picked, task_id, now)
        return picked

    # -- task end, reflection ----------------------------------------------------
    def end_task(
        self,
        task_id: str,
        *,
        success: bool,
        goal: str | None,
        history: Sequence[HistoryBlock] = (),
        project: str | None = None,
        agent: str | None = None,
        at: datetime | None = None,
    ) -> TaskEndReport:
        """Consolidate history, learn from the outcome, promote what matters, clear the task
        (see `hivemind.ltm.taskend`)."""
        return self.task_end.end_task(
            task_id, success=success, goal=goal, history=history, project=project,
            agent=agent, at=at,
        )  # fmt: skip

    async def maybe_reflect(
        self,
        agent: str,
        reflector: Reflector,
        *,
        project: str | None = None,
        at: datetime | None = None,
    ) -> list[MemoryRecord]:
        """Reflect if the agent gathered `reflection_threshold` importance points since the
        last time; returns the semantic memories written (none if not due)."""
        if getattr(reflector, "offline", False) and not self.settings.reflect_offline:
            return []
        if self.counter.points(agent, project) < self.settings.reflection_threshold:
            return []
        now = at or utcnow()
        scope = scope_filter(project, None)
        recent = self.backend.query(
            {**scope, "agent": agent, "kind": MemoryKind.EPISODIC}, limit=RECENT_MEMORIES
        )

        def answer(question: str) -> list[MemoryRecord]:
            hits = self.recall(
                question, agent=agent, project=project, k=MEMORIES_PER_QUESTION, at=now
            )
            return [h.record for h in hits]

        written: list[MemoryRecord] = []
        for insight in await reflect(reflector, recent, answer):
            record = self.remember(
                insight.text, agent=agent, scope="project" if project else "global",
                project=project, importance=REFLECTION_IMPORTANCE, kind=MemoryKind.SEMANTIC,
                source_ids=insight.source_ids, tags=["reflection"], at=now,
                needs_approval=True if project is None else None, tell=False,
            )  # fmt: skip
            written.append(record)
        self.counter.reset(agent, project)
        tell_person(self.hive, written)  # insights of no project wait for a person
        return written

    # -- bulk, stats ---------------------------------------------------------------
    def import_jsonl(
        self,
        lines: Iterable[str],
        *,
        project: str | None = None,
        agent: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> ImportSummary:
        """Import JSONL lines (see `hivemind.ltm.importing`); bad lines are reported and
        skipped. A line updates only the memory with its id in its own scope."""
        return import_lines(
            self.backend, lines, max_items=self.settings.max_items, vectors=self._vectors,
            project=project, agent=agent, progress=progress,
        )  # fmt: skip

    def forget(
        self, memory_ids: Sequence[str], *, project: str | None = None
    ) -> tuple[list[str], list[str]]:
        """Delete these memories (a person's decision, e.g. declining a proposal); returns
        (the ids deleted, the ids no memory had). With `project`, only that project's
        (its tasks' too); without, an id several scopes hold is refused, naming them."""
        wanted = list(dict.fromkeys(memory_ids))
        with self.backend.transaction():
            found = self.backend.get_many(wanted)
            if project is not None:
                found = [r for r in found if r.project == project and r.tier is not Tier.GLOBAL]
            scopes: dict[str, list[str]] = {}
            for record in found:
                scopes.setdefault(record.id, []).append(describe_scope(record.scope))
            for memory_id, where in scopes.items():
                if len(where) > 1:
                    raise UserError(
                        f"id {memory_id} is in {len(where)} scopes ({', '.join(where)}): "
                        "nothing was forgotten; say which with --project"
                    )
            for scope, ids in by_scope(r.ref for r in found).items():
                self.backend.delete_many(ids, scope=scope)
        return [i for i in wanted if i in scopes], [i for i in wanted if i not in scopes]

    def export(self) -> Iterator[dict[str, Any]]:
        """Every memory as a re-importable JSON object, oldest first."""
        for record in self.backend.list_all():
            yield export_line(record)

    def stats(self) -> dict[str, Any]:
        """Counts by tier, kind, status and project, for `hivemind memory stats`."""
        out = summary(self.backend.list_all())
        if isinstance(self.backend, SQLiteBackend):
            out["path"] = str(self.backend.path)
        return out

    def close(self) -> None:
        """Close the store (a backend passed in by the caller stays open)."""
        if self._owns_backend:
            self.backend.close()

    # -- internals ---------------------------------------------------------------
    def _accessed(self, found: Sequence[ScoredMemory], task_id: str | None, at: datetime) -> None:
        for scope, ids in by_scope(m.ref for m in found).items():
            self.backend.touch(ids, at, scope=scope)
        if task_id and found:
            self.learner.record_access(task_id, [ref_key(m.ref) for m in found])

    def _vectors(self, texts: Sequence[str]) -> list[tuple[str, list[float]]] | None:
        """(model, vector) per text, when an embedder is set."""
        if self.embedder is None or not texts:
            return None
        model = self.embedder.name
        return [(model, list(v)) for v in self.embedder.embed(list(texts))]

    def _embedded(self, records: list[MemoryRecord]) -> list[MemoryRecord]:
        """The records with their vectors, when an embedder is set."""
        if self.embedder is None or not records:
            return records
        vectors = self.embedder.embed([r.content for r in records])
        model = self.embedder.name
        return [
            r.model_copy(update={"embedding": list(v), "embedding_model": model})
            for r, v in zip(records, vectors, strict=True)
        ]

    def _enforce_limits(self, agent: str, scope: str, at: datetime) -> None:
        retention.evict_over_capacity(self.backend, self.settings.max_items, scope)
        retention.prune_agent(self.backend, agent, self.policy, at, scope)


def _tier(scope: str, project: str | None, task_id: str | None) -> Tier:
    try:
        tier = Tier(scope)
    except ValueError:
        raise UserError(f"scope must be task, project or global (got {scope!r})") from None
    if tier is Tier.TASK and not task_id:
        raise UserError("a task memory needs the task id")
    if tier is Tier.PROJECT and not project:
        raise UserError("a project memory needs the project name")
    return tier
