"""What `hivemind run` says while it runs: one line per event worth a person's eye.

Start-up (agents, provider, model), each task taken and ended (its id and title, and
its result or reason), errors, and the model service going away and coming back (one
line each, however many retries between). Tasks are seen on the board itself (a file
arriving in `tasks/active/<agent>/`, `tasks/done/`, `tasks/failed/`), so a claim made
by any process of the hive shows. It also adds up each agent's tokens and cost for the
summary.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from hivemind.agent.report import CycleReport, FailureKind
from hivemind.cli.common import counted
from hivemind.cli.spend import AgentSpend
from hivemind.errors import HivemindError
from hivemind.hive.frontmatter import read_rom, read_task
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.models import Task
from hivemind.printable import printable
from hivemind.settings import HiveConfig

LOOK_EVERY = 0.25  # seconds between looks at the board's folders
SHOWN_CHARS = 120  # of a result or a reason, on its one line


def startup_text(hive: Hive, config: HiveConfig, provider: str, names: list[str] | None,
                 pending: int) -> Text:
    """`started: 2 agents (ann, bob), provider anthropic, model claude-…; 3 tasks waiting`."""
    agents = [n for n in hive.agent_names() if names is None or n in names]
    models: dict[str, list[str]] = {}
    for name in agents:
        try:
            model = read_rom(hive.rom_path(name), name, config.agents).model
        except (HivemindError, OSError):
            model = "(ROM invalid)"
        models.setdefault(model, []).append(name)
    if provider == "offline":
        model_text = "no model"
    elif len(models) == 1:
        model_text = f"model {next(iter(models))}"
    else:
        model_text = "models " + ", ".join(f"{m} ({', '.join(n)})" for m, n in models.items())
    shown = ", ".join(agents[:8]) + (f" and {len(agents) - 8} more" if len(agents) > 8 else "")
    return Text.assemble(
        ("started: ", "bold"),
        f"{len(agents)} agent{'s' if len(agents) != 1 else ''} ({shown or 'none'}), "
        f"provider {provider}, {model_text}; {pending} task{'s' if pending != 1 else ''} "
        "waiting. Ctrl-C stops.",
    )


class RunFeed:
    """The lines of a running hive and each agent's spend; `events`: the event lines
    (else, with `cycles`, one line a cycle, as `--until-idle` prints)."""

    def __init__(self, hive: Hive, out: Console, *, events: bool, cycles: bool) -> None:
        self.hive = hive
        self.out = out
        self.events = events
        self.cycles = cycles
        self.spend: dict[str, AgentSpend] = {}
        self._away: dict[str, str] = {}  # agents waiting for the model service, and why
        self._away_since = 0.0
        self._board = BoardWatch(hive, self._say) if events else None
        self._notices = _Notices(self._say)

    def __enter__(self) -> RunFeed:
        if self._board is not None:
            self._board.start()
            # The daemon's own notices (an agent paused, a ROM invalid) get a time too.
            logging.getLogger("hivemind").addHandler(self._notices)
        return self

    def __exit__(self, *_: object) -> None:
        if self._board is not None:
            logging.getLogger("hivemind").removeHandler(self._notices)
            self._board.stop()

    def on_cycle(self, report: CycleReport) -> None:
        """Called by the daemon after each cycle (its own and its workers')."""
        spent = self.spend.setdefault(report.agent, AgentSpend())
        spent.cycles += 1
        spent.tokens += report.usage.total_input + report.usage.output_tokens
        if report.cost is not None:
            spent.cost += report.cost
            spent.priced = True
        if report.unpriced_model:
            spent.unpriced.add(report.unpriced_model)
        if self.events:
            self._event_lines(report)
        elif self.cycles:
            self.out.print(cycle_text(report), soft_wrap=True)

    def _event_lines(self, report: CycleReport) -> None:
        name = report.agent
        if self._board is not None and report.error:
            self._board.look()  # a task taken before the error is said first
        if report.model_failure == FailureKind.TRANSIENT:
            if not self._away:
                self._away_since = time.monotonic()
                self._say(Text.assemble(
                    ("model service away", "yellow"),
                    f" ({name}: {_short(report.error or '?')}); the agents try again with a "
                    "back-off, quietly, and say when it is back"))
            self._away[name] = report.error or ""
            return
        if name in self._away and report.model_failure is None:
            del self._away[name]
            if not self._away:
                took = time.monotonic() - self._away_since
                self._say(Text.assemble(("model service back", "green"),
                                        f" after {_duration(took)}"))
                if self._board is not None:
                    self._board.look()  # what the cycle that found it back did: after
        if report.error and report.model_failure != FailureKind.ACCESS:
            # (a refused key or model: the daemon's own line says the agent is paused)
            self._say(Text.assemble((f"{name} ", "bold"), ("error: ", "red"),
                                    _short(report.error)))

    def _say(self, text: Text) -> None:
        self.out.print(Text.assemble((time.strftime("%H:%M:%S"), "dim"), " ", text),
                       soft_wrap=True)


class _Notices(logging.Handler):
    """The runtime's warnings as feed lines (a time, in yellow), not bare stderr lines."""

    def __init__(self, say: Callable[[Text], None]) -> None:
        super().__init__(logging.WARNING)
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a bad format in a notice is no reason to lose it
            text = str(record.msg)
        style = "red" if record.levelno >= logging.ERROR else "yellow"
        text = printable(text)  # a hive's name or an MCP server's line: no escape sequence
        if record.exc_info:  # a bug of ours: its traceback, to be reported
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.say(Text(text, style))


def cycle_text(report: CycleReport) -> str:
    """One line a cycle (`--until-idle`): the agent, its cycle, what it did, tokens."""
    u = report.usage
    bits = [f"[bold]{report.agent}[/] #{report.cycle}", counted(report.tool_calls, "tool call")]
    if report.tasks_done:
        bits.append(f"[green]{counted(report.tasks_done, 'task', 'done')}[/]")
    if report.messages_sent:
        bits.append(counted(report.messages_sent, "message", "sent"))
    if report.tasks_failed:
        bits.append(f"[red]{counted(report.tasks_failed, 'task', 'failed')}[/]")
    bits.append(f"{u.total_input + u.output_tokens} tokens")
    if report.error:
        bits.append(f"[red]error: {escape(report.error)}[/]")
    return "  ".join(bits)


class BoardWatch:
    """Says each task taken (a file new in tasks/active/<agent>/) and ended (new in
    tasks/done/ or tasks/failed/), from a thread that looks every LOOK_EVERY seconds;
    a folder whose time has not changed is not listed again."""

    def __init__(self, hive: Hive, say: Callable[[Text], None]) -> None:
        self.hive = hive
        self.say = say
        self._seen: dict[Path, tuple[int, set[str]]] = {}  # folder: (mtime, names)
        self._taken: set[str] = set()  # ids of the tasks said taken and not said ended
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="hivemind-run-feed",
                                        daemon=True)

    def start(self) -> None:
        self.look(quiet=True)  # what is there already is no news
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.look()  # the last moves of the run

    def _run(self) -> None:
        while not self._stop.wait(LOOK_EVERY):
            try:
                self.look()
            except OSError:  # a file moved or removed as it was looked at: next look
                continue

    def look(self, quiet: bool = False) -> None:
        """Say what changed on the board since the last look (`quiet`: note it only)."""
        with self._lock:  # the thread's looks and the feed's own, one at a time
            self._look(quiet)

    def _look(self, quiet: bool) -> None:
        for folder, state in self._folders():
            for name in self._new_names(folder, quiet):
                if quiet:
                    continue
                task = _read(folder / name)
                tid = task.id if task is not None else name.removesuffix(".md")
                if state != "took" and tid not in self._taken and task is not None:
                    # Taken and ended between two looks: its taking is news too.
                    self.say(task_line(folder / name, "took", task))
                if state == "took":
                    self._taken.add(tid)
                else:
                    self._taken.discard(tid)
                self.say(task_line(folder / name, state, task))

    def _folders(self) -> Iterable[tuple[Path, str]]:
        try:
            agents = sorted(e.name for e in os.scandir(self.hive.active_dir)
                            if e.is_dir(follow_symlinks=False) and not is_temp_name(e.name))
        except OSError:
            agents = []
        yield from ((self.hive.active_dir_for(a), "took") for a in agents)
        yield self.hive.done_dir, "done"
        yield self.hive.failed_dir, "failed"

    def _new_names(self, folder: Path, quiet: bool) -> list[str]:
        try:
            mtime = os.stat(folder).st_mtime_ns
        except OSError:
            return []
        before = self._seen.get(folder)
        if before is not None and before[0] == mtime:
            return []
        try:
            names = {n for n in os.listdir(folder) if n.endswith(".md") and not is_temp_name(n)}
        except OSError:
            return []
        self._seen[folder] = (mtime, names)
        fresh = names - before[1] if before is not None else (set() if quiet else names)
        return sorted(fresh)


def _read(path: Path) -> Task | None:
    try:
        return read_task(path)
    except (HivemindError, OSError, ValueError):  # moved on meanwhile, or unreadable
        return None


def task_line(path: Path, state: str, task: Task | None) -> Text:
    """`ann took t1 "Title"`, `ann done t1 "Title": result`, `failed t1 "Title": why`."""
    tid = task.id if task is not None else path.stem
    title = (task.title if task is not None else "") or ""
    agent = (task.agent if task is not None else None) or (
        path.parent.name if state == "took" else "")
    style = {"took": "cyan", "done": "green", "failed": "red"}[state]
    text = Text.assemble((f"{agent} " if agent else "", "bold"), (state, style), f" {tid}")
    if title and title != tid:
        text.append(f" {_quoted(title)}")
    if state != "took" and task is not None:
        outcome = _last_section(task.body)
        if outcome:
            text.append(f": {_short(outcome)}")
    return text


def _last_section(body: str) -> str:
    """The text of the body's last `## ` section (a result, or why it failed)."""
    _, sep, tail = body.rpartition("\n## ")
    if not sep:
        return ""
    return tail.partition("\n")[2].strip()


def _quoted(text: str) -> str:
    return '"' + _short(text, 60) + '"'


def _short(text: str, limit: int = SHOWN_CHARS) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    return f"{minutes // 60} h {minutes % 60} min"
