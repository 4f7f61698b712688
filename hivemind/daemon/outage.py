"""How the daemon meets a model API that fails (see `agent.model_failure` for the kinds).

A transient failure is retried after an exponential back-off that honours the API's
retry-after; meanwhile the agent's status reads "waiting for the model service, next
try in N s", and `--until-idle` waits up to `[daemon] give_up_after` seconds. A
refused key or model pauses the agent: one line on the console and in status, its
tasks back to tasks/ for the others, one mail to `human`; an edit of its ROM (or a
restart) lifts the pause.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from hivemind.agent.cycle import Agent
from hivemind.agent.record import CycleFailed
from hivemind.agent.report import CycleReport, FailureKind
from hivemind.hive.layout import HUMAN, Hive

if TYPE_CHECKING:
    from hivemind.agent.services import HiveServices
    from hivemind.daemon.runner import AgentRunner

logger = logging.getLogger(__name__)

BACKOFF_MAX = 300.0
GIVE_UP_WHEN_IDLE = 3  # failed cycles in a row (not the model service's) before --until-idle stops
WAITING = "waiting for the model service"


def rom_version(hive: Hive, name: str) -> str:
    """The ROM file's version (mtime and size): a pause lasts while it is unchanged."""
    try:
        st = hive.rom_path(name).stat()
    except OSError:
        return "missing"
    return f"{st.st_mtime_ns}:{st.st_size}"


def schedule_retry(runner: AgentRunner, report: CycleReport, backoff_start: float) -> bool:
    """After a cycle: a failed one is tried again after its back-off (True); a good one
    ends any wait for the model service (False)."""
    if not report.retry:
        runner.failures = 0
        runner.model_wait_since = None
        return False
    runner.failures += 1
    backoff = min(BACKOFF_MAX, backoff_start * 2 ** (runner.failures - 1))
    # Never sooner than the API asked (its retry-after), however early the back-off.
    backoff = max(backoff, report.retry_after or 0.0)
    now = time.monotonic()
    runner.retry_at = now + backoff
    if report.model_failure == FailureKind.TRANSIENT:
        if runner.model_wait_since is None:
            runner.model_wait_since = now
    else:
        runner.model_wait_since = None
    return True


def still_trying(runner: AgentRunner, give_up_after: float) -> bool:
    """True while `--until-idle` should wait for the runner's next try: a wait for the
    model service up to `give_up_after` seconds, other failures GIVE_UP_WHEN_IDLE times."""
    if not runner.retry_at:
        return False
    if runner.model_wait_since is not None:
        return time.monotonic() - runner.model_wait_since < give_up_after
    return runner.failures < GIVE_UP_WHEN_IDLE


def stall_reason(runners: Iterable[AgentRunner]) -> str:
    """Why `--until-idle` stops with work left: "model-unavailable" if an agent gave up
    waiting for the model service, else "stalled"."""
    waited = any(r.model_wait_since is not None for r in runners)
    return "model-unavailable" if waited else "stalled"


def waiting_text(runner: AgentRunner) -> str | None:
    """"waiting for the model service, next try in N s" while the runner waits for it."""
    if runner.model_wait_since is None or not runner.retry_at:
        return None
    left = max(0, math.ceil(runner.retry_at - time.monotonic()))
    return f"{WAITING}, next try in {left} s"


def broken_cycle(agent: Agent, exc: Exception) -> CycleReport:
    """The filesystem (a folder replaced by a file, a full disk) or a bug failed a cycle:
    it fails visibly (status, the audit log), counts what it spent (its record's
    tokens), and is retried after its back-off; the daemon stays up."""
    agent.last_error = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(OSError):
        agent.audit.append(CycleFailed(cycle=agent.cycle_no, error=agent.last_error))
    report = agent.recorded or CycleReport(agent=agent.name)  # its tokens were spent
    report.ran, report.error, report.retry = True, agent.last_error, True
    return report


def give_back(services: HiveServices, name: str) -> list[str]:
    """The tasks `name` holds back to tasks/ for the others; the ones given back."""
    try:
        return services.board.release_all(name)
    except OSError as exc:
        logger.warning("tasks/active/%s: cannot give its tasks back: %s", name, exc)
        return []


def pause_if_refused(services: HiveServices, runner: AgentRunner, report: CycleReport) -> bool:
    """If the API refused the agent's key or model: pause it, give its tasks back, say
    so once on the console and once to `human`; True if it paused (routing changed)."""
    if report.model_failure != FailureKind.ACCESS:
        return False
    name = runner.agent.name
    runner.model_pause = report.error or "the model API refused the key or the model"
    runner.paused_rom = rom_version(services.hive, name)
    released = give_back(services, name)
    back = f"; its tasks are back in tasks/: {', '.join(released)}" if released else ""
    logger.warning("%s is paused until its ROM is edited, the daemon restarts or "
                   "`hivemind resume %s`: %s%s", name, name, runner.model_pause, back)
    with contextlib.suppress(OSError):  # the console line and status.json still say it
        services.post.send(
            name, HUMAN, f"[paused] {name}: the model API refused it",
            f"{name} is paused: {runner.model_pause}\n\nIts tasks went back to tasks/ for "
            "the other agents" + (f" ({', '.join(released)})" if released else "")
            + "; tasks assigned to it wait. Fix the key (or the ROM's `model:`), then "
            f"edit agents/{name}/ROM.md, restart the daemon or run `hivemind resume {name}`: "
            f"{name} resumes.",
        )
    return True


def lift_pause(hive: Hive, runner: AgentRunner | None) -> bool:
    """Lift the runner's pause if its ROM was edited since; True if it was lifted."""
    if runner is None or runner.model_pause is None:
        return False
    if rom_version(hive, runner.agent.name) == runner.paused_rom:
        return False
    logger.warning("%s resumes: its ROM was edited", runner.agent.name)
    runner.model_pause = None
    runner.failures = 0
    return True


def agent_state(runner: AgentRunner, final: bool = False) -> str:
    """The agent's state for status.json and `hivemind status` (`final`: the daemon has
    stopped)."""
    agent = runner.agent
    if runner.busy:
        return "thinking"
    if runner.model_pause is not None:
        return ("paused (the model API refused it; edit its ROM, restart or `hivemind resume` "
                "to resume)")
    if runner.steer_pause is not None:
        return f"paused ({runner.steer_pause})"
    if final and runner.model_wait_since is not None:
        return f"stopped {WAITING}"
    waiting = waiting_text(runner)
    if waiting is not None:
        return waiting
    if agent.last_error:
        return "error"
    return "paused (its daily token budget is spent)" if agent.budget.paused_today() else "idle"
