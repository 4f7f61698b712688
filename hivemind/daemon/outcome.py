"""What a run met that did not end well, and the exit code of `hivemind run` it makes.

    0  every task the run touched ended in done/, and nothing it met failed, was
       rejected, paused or invalid
    3  work is left that cannot move without you: a task waits (for an agent that
       does not run, a dependency, an answer), or the model service stayed away
       longer than `[daemon] give_up_after`, or the disk stayed full that long; or
       --until-idle was stopped (Ctrl-C, a signal, --max-cycles) with tasks in hand
    4  the run ended, but a task failed or was rejected, an agent was paused (the
       model API refused its key or model) or has an invalid ROM

(1 is a refusal before anything ran, e.g. no credentials; 2 a mistake on the command
line, or a runtime failure.)
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hivemind.errors import HivemindError
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive
from hivemind.hive.quarantine import REASON_SUFFIX, rejected

if TYPE_CHECKING:
    from hivemind.daemon.runner import AgentRunner

EXIT_OK = 0
EXIT_WORK_LEFT = 3
EXIT_NOT_ALL_WELL = 4
DISK_FULL = "disk-full"  # --until-idle: the disk stayed full past `give_up_after`
WORK_LEFT = ("stalled", "model-unavailable", DISK_FULL)  # stop reasons that leave work behind
CUT_SHORT = ("signal", "max-cycles")  # stops a person or a limit made before the run's end
IN_HAND = "in hand"

_ATTEMPT = re.compile(r"^## Attempt \d+ failed\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Trouble:
    """One thing the run met that did not end well: what, and why."""

    kind: str  # "failed", "rejected", "paused", "invalid ROM"
    name: str  # the task id, the rejected file, or the agent
    reason: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class BoardBefore:
    """The names in tasks/failed/ and tasks/rejected/ when the run started."""

    failed: frozenset[str]
    rejected: frozenset[str]

    @classmethod
    def of(cls, hive: Hive) -> BoardBefore:
        return cls(_names(hive.failed_dir), _names(hive.rejected_dir))


def _names(folder: Path) -> frozenset[str]:
    with contextlib.suppress(OSError):
        return frozenset(p.name for p in folder.iterdir()
                         if not p.name.startswith(".") and not p.name.endswith(REASON_SUFFIX))
    return frozenset()


def _failed_reason(path: Path) -> str:
    """The reason of a failed task's last attempt, on one line."""
    try:
        body = read_task(path).body
    except (HivemindError, OSError):
        return "(its file cannot be read)"
    attempts = list(_ATTEMPT.finditer(body))
    text = body[attempts[-1].end():] if attempts else ""
    return " ".join(text.split()) or "(no reason given)"


def troubles(
    hive: Hive, before: BoardBefore, runners: Iterable[AgentRunner]
) -> list[Trouble]:
    """What this run failed, rejected, paused, or found invalid, each with its reason."""
    found = []
    for name in sorted(_names(hive.failed_dir) - before.failed):
        path = hive.failed_dir / name
        found.append(Trouble("failed", path.stem, _failed_reason(path)))
    for path, reason in rejected(hive):
        if path.name not in before.rejected:
            found.append(Trouble("rejected", hive.relative(path), reason or "(no reason file)"))
    for runner in runners:
        agent = runner.agent
        if runner.model_pause is not None:
            found.append(Trouble("paused", agent.name, runner.model_pause))
        elif runner.paused_on is not None:
            found.append(Trouble("paused", agent.name, "its daily token budget is spent"))
        if agent.config_error:
            found.append(Trouble("invalid ROM", agent.name, agent.config_error))
    return found


def in_hand(hive: Hive) -> list[Trouble]:
    """The tasks still claimed in tasks/active/<agent>/, for a run cut short."""
    found = []
    with contextlib.suppress(OSError):
        for folder in sorted(hive.active_dir.iterdir()):
            with contextlib.suppress(OSError):
                found += [Trouble(IN_HAND, f"{folder.name}/{p.stem}",
                                  "the run stopped before it ended; it resumes at the next run")
                          for p in sorted(folder.glob("*.md")) if not p.name.startswith(".")]
    return found


def exit_code(reason: str, found: list[Trouble]) -> int:
    """The exit code of `hivemind run` that stopped for `reason` (see the module)."""
    if any(t.kind != IN_HAND for t in found):
        return EXIT_NOT_ALL_WELL
    if reason in WORK_LEFT or found:
        return EXIT_WORK_LEFT
    return EXIT_OK


def outcome(
    hive: Hive, before: BoardBefore, runners: Iterable[AgentRunner], reason: str,
    until_idle: bool,
) -> tuple[list[Trouble], int]:
    """What a run that stopped for `reason` met that did not end well, and its exit code;
    an --until-idle run cut short also lists the tasks it left in hand."""
    found = troubles(hive, before, runners)
    if until_idle and reason in CUT_SHORT:
        found += in_hand(hive)
    return found, exit_code(reason, found)
