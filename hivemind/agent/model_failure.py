"""What a cycle does when the model API fails, by the failure's kind.

    transient  the service is away (429, 529, 5xx, timeouts, refused connections):
               nothing is marked read, done or failed; the daemon tries again after
               a back-off that honours the API's retry-after
    access     the key or the model is refused (401, 403, 404): no try will help;
               the daemon pauses the agent and gives its tasks back (`daemon.outage`)
    request    this request was refused (another 4xx, e.g. a context too long): the
               tasks it was for fail with the error; its mail stays unread
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hivemind.agent.report import CycleReport, FailureKind
from hivemind.errors import ModelAccessError, ModelError, ModelRequestError, UserError
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.ref import TaskRef

logger = logging.getLogger(__name__)


def failure_kind(exc: ModelError) -> FailureKind:
    """The kind of a provider error; anything not known to be permanent is transient."""
    if isinstance(exc, ModelAccessError):
        return FailureKind.ACCESS
    if isinstance(exc, ModelRequestError):
        return FailureKind.REQUEST
    return FailureKind.TRANSIENT


def note_model_error(report: CycleReport, exc: ModelError) -> None:
    """Record a provider error in the cycle's report: only a transient one is retried
    (the same key, model or request would be refused again)."""
    report.error = f"{type(exc).__name__}: {exc}"
    report.model_failure = failure_kind(exc)
    report.retry = report.model_failure == FailureKind.TRANSIENT
    report.retry_after = exc.retry_after if report.retry else None


def fail_refused_tasks(
    board: TaskBoard, agent: str, held: Mapping[str, TaskRef], report: CycleReport
) -> list[str]:
    """A request the API refused (a 400) is the request's fault: the tasks it was for
    fail with the error, to failed/ at once (the same request would be refused again)."""
    if report.model_failure != FailureKind.REQUEST:
        return []
    failed = []
    for tid, ref in held.items():
        try:
            board.fail(ref, f"the model API refused the request: {report.error}", agent,
                       final=True)
        except (UserError, OSError) as exc:  # moved meanwhile: nothing to fail
            logger.warning("%s: task %s not failed: %s", agent, tid, exc)
            continue
        failed.append(tid)
    report.tasks_failed += len(failed)
    return failed
