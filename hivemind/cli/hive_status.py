"""`hivemind status` from the disk alone: works whether or not a daemon runs."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from hivemind.daemon.status_file import DaemonStatus
from hivemind.errors import ConfigError, UnknownAgentError
from hivemind.fs.flocks import holders_of
from hivemind.hive.assignees import waiting_for_no_agent
from hivemind.hive.changes import tasks_not_read
from hivemind.hive.config import load_config
from hivemind.hive.layout import HUMAN, Hive, is_temp_name
from hivemind.hive.leftovers import pid_alive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.models import TaskState
from hivemind.hive.quarantine import rejected
from hivemind.hive.rom import RomRegistry
from hivemind.hive.steering import PauseRecord, paused_agents
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.trust import ProviderTrust
from hivemind.llm.catalog import CATALOG_FILE, ModelCatalog, known_ids, model_problem
from hivemind.settings import AgentConfig, HiveConfig


class AgentStatus(BaseModel):
    """One agent: is its ROM valid, what is it doing."""

    name: str
    ok: bool  # its ROM.md as it is now is valid
    error: str | None = None
    last_good: bool = False  # not ok, but it runs on the last good config it had
    warnings: list[str] = Field(default_factory=list)  # valid, but likely not meant
    role: str = ""
    model: str | None = None
    active_tasks: int = 0
    unread: int = 0
    paused: str | None = None  # paused by a person (`hivemind pause`, `enabled: false`): why


class RejectedFile(BaseModel):
    """A file in tasks/rejected/ and why."""

    file: str
    reason: str


class HiveStatus(BaseModel):
    """Everything `hivemind status` shows."""

    root: str
    config_error: str | None = None
    trust: ProviderTrust | None = Field(
        default=None,
        description="whether you trust hive.toml (`hivemind trust`), and the [provider] keys "
        "of it ignored until you do; null if hive.toml is invalid",
    )
    agents: list[AgentStatus] = Field(default_factory=list)
    tasks: dict[TaskState, int] = Field(default_factory=dict)
    mail: dict[str, int] = Field(default_factory=dict, description="unread per mailbox")
    rejected: list[RejectedFile] = Field(default_factory=list)
    not_tasks: list[str] = Field(
        default_factory=list,
        description="files and folders in tasks/ not read as tasks, each with why and what to do",
    )
    no_agent: list[str] = Field(
        default_factory=list,
        description="pending tasks assigned to a name the hive has no agent for (they wait), "
        "each with what to do",
    )
    daemon: Any = Field(
        default=None,
        description=".hivemind/status.json as the daemon last wrote it, except: `running` is "
        "false and `killed` true if its process is gone; `running` and `stale` true if a "
        "daemon holds the hive's lock but could not write the file (a full disk); `{error}` "
        "if the file is unreadable or a field of it is wrong",
    )


def _mailboxes(hive: Hive, agents: list[str]) -> dict[str, int]:
    names = {*agents, HUMAN}
    with contextlib.suppress(FileNotFoundError):
        names |= {
            e.name
            for e in os.scandir(hive.mailboxes_dir)
            if e.is_dir(follow_symlinks=False) and not is_temp_name(e.name)
        }
    return {name: Mailbox(hive, name).count_unread() for name in sorted(names)}


_STATUS_BYTES = 16 * 1024 * 1024  # status.json of a daemon of thousands of agents


def _lock_holder(hive: Hive) -> int | None:
    """The pid of the daemon holding the hive's lock (its folder's, or on NFS its lock
    file's), or None if no process holds it (or none can be told: no /proc/locks)."""
    pids = holders_of(hive.root, follow=True) or holders_of(hive.lock_file)
    return pids[0] if pids else None


def daemon_status(hive: Hive) -> Any:
    """status.json, with `running` checked against the process: a killed daemon (SIGKILL,
    power loss) never wrote its last status, so the file alone still says running; one
    that cannot write it (a full disk) leaves an old one saying stopped, or none."""
    shown = hive.relative(hive.status_file)
    holder = _lock_holder(hive)
    try:  # never through a link (a cloned .hivemind/ may carry one), nor without end
        fd = os.open(hive.status_file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            data = json.loads(fh.read(_STATUS_BYTES))
    except FileNotFoundError:
        return None if holder is None else {"running": True, "pid": holder, "stale": True}
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else " ".join(str(exc).split())
        return {"error": f"{shown} is not readable ({reason})"}
    if not isinstance(data, dict):
        return {"error": f"{shown} is not readable (not a JSON object)"}
    try:
        DaemonStatus.parse(data)  # every field as the daemon writes it
    except ValueError as exc:
        return {"error": f"{shown} is not readable ({exc})"}
    if holder is not None and not data.get("running"):
        data.pop("stopped_because", None)  # that of a run before this one
        data.update(running=True, pid=holder, stale=True)
    elif data.get("running") and not pid_alive(data.get("pid"), if_unsure=False):
        data.update(running=False, killed=True)
    return data


def _model_check(hive: Hive, settings: HiveConfig) -> Callable[[str], str | None]:
    """Why a model is no model id: not in the list the daemon last got from the provider
    (`.hivemind/models.json`), or with none, not an id the hive knows."""
    catalog = ModelCatalog.read(hive.state_dir / CATALOG_FILE, hive.root)
    known = known_ids(settings.pricing, settings.models)
    return lambda model: model_problem(model, catalog, known, settings.models)


def _paused(record: PauseRecord | None, config: AgentConfig) -> str | None:
    """Why a person has the agent paused, or None."""
    if record is not None:
        return (f"paused by {record.by} at {record.at:%Y-%m-%d %H:%M} UTC; "
                f"`hivemind resume {record.agent}` resumes it")
    return None if config.enabled else "paused: its ROM says enabled: false"


def hive_status(
    hive: Hive, fixed_tokens: Callable[[AgentConfig], int] | None = None
) -> HiveStatus:
    """Agents (config ok or the error), tasks per state, unread mail, rejected files.
    `fixed_tokens`: what each request carries besides the context (for ROM warnings)."""
    config_error, trust, settings = None, None, HiveConfig()
    try:
        loaded = load_config(hive)
        settings, trust = loaded.config, loaded.trust
    except ConfigError as exc:
        config_error = str(exc)
    roms = RomRegistry(hive, settings.agents, models=settings.models)
    roms.tells_problems = False  # they are in the status itself, each once
    roms.model_problem = _model_check(hive, settings)
    roms.fixed_tokens = fixed_tokens
    board = TaskBoard(hive)
    load = board.load()
    names = roms.agents()
    pauses = paused_agents(hive)
    mail = _mailboxes(hive, names)
    agents = []
    for name in names:
        try:
            config = roms.load(name)
        except (ConfigError, UnknownAgentError) as exc:
            agents.append(AgentStatus(name=name, ok=False, error=str(exc), unread=mail[name]))
            continue
        error = roms.error(name)  # the ROM is invalid now, the last good config kept
        agents.append(
            AgentStatus(
                name=name,
                ok=error is None,
                error=error,
                last_good=error is not None,
                warnings=roms.warnings(name),
                role=config.summary,
                model=config.model,
                active_tasks=load.get(name, 0),
                unread=mail[name],
                paused=_paused(pauses.get(name), config),
            )
        )
    return HiveStatus(
        root=str(hive.root),
        config_error=config_error,
        trust=trust,
        agents=agents,
        tasks=board.counts(),
        mail=mail,
        rejected=[
            RejectedFile(file=hive.relative(path), reason=reason) for path, reason in rejected(hive)
        ],
        not_tasks=tasks_not_read(hive),
        no_agent=waiting_for_no_agent(hive, names),
        daemon=daemon_status(hive),
    )
