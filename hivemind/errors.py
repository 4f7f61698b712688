"""The one error tree of hivemind.

    HivemindError
    ├── UserError                     a person can fix it (bad file, bad flag, bad path)
    │   ├── ConfigError               hive.toml or ROM.md is invalid
    │   ├── FileFormatError           a task / message / ROM file cannot be parsed
    │   ├── PathEscapeError           a path lies outside the allowed folders
    │   ├── UnknownAgentError         no agents/<name>/ROM.md for that name
    │   ├── HiveLockedError           another daemon already runs on this hive
    │   └── MemoryFullError           a memory scope is full of memories none may evict
    └── RuntimeFailure                the runtime could not do its job
        ├── BudgetError               the budget cannot hold what must be sent
        │   └── CriticalOverBudgetError   CRITICAL blocks alone exceed the budget
        ├── BudgetExhaustedError      an agent spent its daily / per-task tokens
        ├── ModelError                the model API failed
        │   ├── ModelUnavailableError transient: the agent waits and tries again
        │   │   ├── ModelRateLimitError   429 / 529
        │   │   └── ModelConnectionError  network, timeout, refused connection, 408, 409
        │   ├── ModelAccessError      401 / 403 / 404: no try will do; the agent pauses
        │   └── ModelRequestError     other 4xx: this request was refused; its task fails
        ├── ToolError                 a tool call failed (fed back to the model)
        ├── DiskFullError             no space left: the hive's writers wait (an OSError)
        ├── StoreError                the long-term memory store failed
        ├── LockUnavailableError      the hive's filesystem cannot lock a file
        └── WorkerError               a worker process (`run --workers`) failed
            ├── WorkerLostError       it ended: its agents come back to the daemon
            └── WorkerCrashedError    a cycle hit a bug there (its traceback inside)

User errors print as one line, never a traceback; runtime failures are
recorded in the audit log and `hivemind status`.
"""

from __future__ import annotations

from pathlib import Path


class HivemindError(Exception):
    """Root of every error hivemind raises on purpose."""


class UserError(HivemindError):
    """Something a person can fix: the message says what and where."""


class ConfigError(UserError):
    """hive.toml or an agent's ROM.md is invalid."""


class FileFormatError(UserError):
    """A file in the hive cannot be parsed; `path` and `line` say where."""

    def __init__(self, path: Path | str, problem: str, line: int | None = None) -> None:
        self.path = Path(path)
        self.problem = problem
        self.line = line
        where = f"{self.path}" + (f": line {line}" if line is not None else "")
        super().__init__(f"{where}: {problem}")

    @property
    def reason(self) -> str:
        """The one-line reason without the path (for `.reason` files)."""
        return (f"line {self.line}: " if self.line is not None else "") + self.problem


class PathEscapeError(UserError):
    """A path resolves outside the folders it is allowed to touch."""


class UnknownAgentError(UserError):
    """No agent of that name exists in the hive."""


class HiveLockedError(UserError):
    """Another daemon holds the hive lock."""

    def __init__(self, hive: Path, pid: int | None) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"{hive}: a hivemind daemon already runs on this hive ({who})")


class MemoryFullError(UserError):
    """A write to long-term memory is refused: its scope (a task, a project, the global
    tier) holds `[memory] max_items` memories and none of them may be evicted."""


class RuntimeFailure(HivemindError):
    """The runtime could not do its job; not a user's mistake."""


class BudgetError(RuntimeFailure):
    """The token budget cannot hold what must be sent."""


class CriticalOverBudgetError(BudgetError):
    """CRITICAL blocks alone do not fit the budget."""

    def __init__(self, sizes: dict[str, int], budget: int) -> None:
        self.sizes = sizes
        self.budget = budget
        listed = ", ".join(f"{bid} ({n} tokens)" for bid, n in sizes.items())
        super().__init__(
            f"CRITICAL blocks need {sum(sizes.values())} tokens but the budget is {budget}: "
            f"{listed}; shorten them or raise max_context_tokens"
        )


class BudgetExhaustedError(RuntimeFailure):
    """An agent has spent its token budget for the day or the task."""


class ModelError(RuntimeFailure):
    """The model API failed (a kind below says what to do about it)."""

    retry_after: float | None = None
    """Seconds the API asked to wait (its retry-after), when it said."""


class ModelUnavailableError(ModelError):
    """The model service is away for now (overloaded, 5xx, unreachable): wait, retry."""


class ModelRateLimitError(ModelUnavailableError):
    """Rate limited or overloaded (429 / 529)."""


class ModelConnectionError(ModelUnavailableError):
    """The model API could not be reached or timed out."""


class ModelAccessError(ModelError):
    """The key or the model is refused (401 / 403 / 404): the same agent cannot go on
    until a person acts (a new key, another `model:`)."""


class ModelRequestError(ModelError):
    """The model API refused this request (4xx but 401/403/404/408/409/429): its fault."""


class ToolError(RuntimeFailure):
    """A tool call failed; the message is shown to the model as a tool error."""


class DiskFullError(RuntimeFailure, OSError):
    """The disk under the hive is full (ENOSPC, EDQUOT): the daemon pauses its writers
    until space is back. An OSError too, so every `except OSError` still holds."""


class StoreError(RuntimeFailure):
    """The long-term memory store failed."""


class LockUnavailableError(RuntimeFailure):
    """The daemon's lock file cannot be locked where the hive lives (e.g. NFS with no
    lock manager): nothing would keep a second daemon out, so none starts."""


class WorkerError(RuntimeFailure):
    """A worker process of `hivemind run --workers` failed."""


class WorkerLostError(WorkerError):
    """A worker process ended; the daemon runs its agents itself from then on."""


class WorkerCrashedError(WorkerError):
    """A cycle raised a bug in a worker process: `error` is that exception (as it crossed
    the pipe), `where` its traceback there."""

    def __init__(self, error: Exception, where: str, pid: int | None) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error
        self.where = where
        self.pid = pid
