"""`hivemind memory import`: JSONL lines into the store, scope by scope.

Each line lands in its scope (see `jsonl`) and updates only the memory with its id
there. A scope that is full with nothing it may evict refuses its new lines (each
reported with the reason); after the import each scope written to is brought back
under `max_items` by evicting from that scope alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from pydantic import ValidationError

from hivemind.ltm import retention
from hivemind.ltm.backend import MemoryBackend
from hivemind.ltm.jsonl import (
    ImportSummary,
    NumberedLine,
    describe,
    line_scope,
    read_batches,
    same_record,
    to_record,
)
from hivemind.ltm.records import MemoryRecord
from hivemind.ltm.scopes import MemoryRef, by_scope, describe_scope

IMPORT_BATCH = 5_000
Vectors = Callable[[Sequence[str]], list[tuple[str, list[float]]] | None]
"""(model, vector) per text, or None without an embedder."""


def import_lines(
    backend: MemoryBackend,
    lines: Iterable[str],
    *,
    max_items: int,
    vectors: Vectors,
    project: str | None = None,
    agent: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Import JSONL lines; bad lines are reported and skipped."""
    report = ImportSummary()
    started = time.perf_counter()
    written: set[str] = set()
    for batch, consumed in read_batches(lines, report, IMPORT_BATCH, project):
        if batch:
            batch_import = _Batch(backend, max_items, project, agent, report)
            written |= batch_import.run(batch, vectors)
        if progress is not None:
            progress(consumed)
    for scope in sorted(written):
        report.evicted += len(retention.evict_over_capacity(backend, max_items, scope))
    report.seconds = time.perf_counter() - started
    return report


class _Batch:
    """One batch of good lines, written in one transaction."""

    def __init__(
        self,
        backend: MemoryBackend,
        max_items: int,
        project: str | None,
        agent: str | None,
        report: ImportSummary,
    ) -> None:
        self.backend = backend
        self.max_items = max_items
        self.project = project
        self.agent = agent
        self.report = report
        self._refusals: dict[str, str | None] = {}

    def run(self, batch: Sequence[NumberedLine], vectors: Vectors) -> set[str]:
        """Write the batch; returns the scopes written to."""
        # Vectors first: the transaction below should not wait for a model.
        made = vectors([line.content for _, line in batch])
        written: set[str] = set()
        # One transaction: the stored memories read are the ones then replaced.
        with self.backend.transaction():
            scopes = [line_scope(line, self.project) for _, line in batch]
            stored = self._stored(batch, scopes)
            records: list[MemoryRecord] = []
            for i, (number, line) in enumerate(batch):
                found = stored.get((scopes[i] or "", line.id or ""), [])
                if len(found) > 1:  # a line naming no scope, its id in several
                    where = ", ".join(describe_scope(r.scope) for r in found)
                    self.report.errors.append(
                        f"line {number}: id {line.id} is in {len(found)} scopes ({where}): "
                        "give --project, or a project or tier on the line"
                    )
                    continue
                before = found[0] if found else None
                try:
                    record = to_record(
                        line, self.project, self.agent, stored=before,
                        vector=None if made is None else made[i],
                    )  # fmt: skip
                except ValidationError as exc:
                    self.report.errors.append(f"line {number}: {describe(exc)}")
                    continue
                if before is None and (why := self._refusal(record.scope)) is not None:
                    self.report.errors.append(f"line {number}: {why}")
                    continue
                self.report.imported += 1
                if before is None:
                    records.append(record)
                elif same_record(record, before):
                    self.report.unchanged += 1
                else:
                    self.report.updated += 1
                    records.append(record)
                written.add(record.scope)
            self.backend.add_many(records)
        return written

    def _stored(
        self, batch: Sequence[NumberedLine], scopes: Sequence[str | None]
    ) -> dict[MemoryRef, list[MemoryRecord]]:
        """(line scope or "", id) → the stored memories a line may update: the one with
        its id in the scope it names, or every one with its id if it names none."""
        named = by_scope(
            (scope, line.id)
            for scope, (_, line) in zip(scopes, batch, strict=True)
            if scope is not None and line.id is not None
        )
        out: dict[MemoryRef, list[MemoryRecord]] = {}
        for scope, ids in named.items():
            for record in self.backend.get_many(ids, scope=scope):
                out[record.ref] = [record]
        loose = [
            line.id
            for scope, (_, line) in zip(scopes, batch, strict=True)
            if scope is None and line.id is not None
        ]
        for record in self.backend.get_many(loose) if loose else []:
            out.setdefault(("", record.id), []).append(record)
        return out

    def _refusal(self, scope: str) -> str | None:
        """Why `scope` takes no new memory (asked once per batch), or None."""
        if scope not in self._refusals:
            self._refusals[scope] = retention.refusal(self.backend, scope, self.max_items)
        return self._refusals[scope]
