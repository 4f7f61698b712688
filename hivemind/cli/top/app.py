"""`hivemind top`: the textual dashboard. It only draws `TopSnapshot`s (see `snapshot`)
and turns keys into the steering of `hive.steering`; every file read happens in a
worker thread, never on the screen's loop."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, RichLog, Static
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

from hivemind.cli.top.feed import FeedEvent, printable, turns
from hivemind.cli.top.snapshot import DISABLED, AgentRow, HiveReader, TopSnapshot
from hivemind.cli.top.taskfolders import TaskLine
from hivemind.errors import UserError
from hivemind.hive import steering
from hivemind.hive.layout import Hive

REFRESH = 1.0
CONVERSATION_CYCLES = 12

_STATE_STYLE = {"thinking": "bold green", "waiting": "yellow", "paused": "bold yellow",
                "error": "bold red", "stopped": "dim", "idle": ""}
_KIND_STYLE = {"done": "green", "failed": "red", "error": "bold red", "claimed": "cyan",
               "mail": "blue", "rom": "magenta", "steer": "bold yellow"}
_TASK_STYLE = {"failed": "red", "rejected": "red", "active": "green", "done": "dim"}


class ConversationScreen(ModalScreen[None]):
    """An agent's recent turns: what the model said, its tool calls, their results."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "Back")]
    DEFAULT_CSS = """
    ConversationScreen { align: center middle; }
    ConversationScreen > RichLog { width: 95%; height: 90%; border: round $accent; }
    """

    def __init__(self, agent: str, lines: list[str]) -> None:
        super().__init__()
        self.agent = agent
        self.lines = lines

    def compose(self) -> ComposeResult:
        log = RichLog(id="conversation", wrap=True, markup=False, highlight=False)
        log.border_title = f"{self.agent}: recent turns (Esc: back)"
        yield log

    def on_mount(self) -> None:
        log = self.query_one(RichLog)
        for line in self.lines:
            log.write(Text(line))

    def action_close(self) -> None:
        self.dismiss()


class TopApp(App[None]):
    """Agents, tasks by state and an event feed of one hive, refreshed every second."""

    TITLE = "hivemind top"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "pause", "Pause/resume agent"),
        Binding("r", "retry", "Retry task"),
        Binding("c,enter", "conversation", "Conversation"),
        Binding("tab", "focus_next", "Next panel", show=False),
        Binding("q", "quit", "Quit"),
    ]
    DEFAULT_CSS = """
    #daemon { height: 2; padding: 0 1; }
    #agents { height: auto; max-height: 45%; }
    #lower { height: 1fr; }
    #tasks { width: 1fr; }
    #feed { width: 1fr; border-left: solid $accent; }
    """

    def __init__(self, hive: Hive, refresh: float = REFRESH) -> None:
        super().__init__()
        self.hive = hive
        self.reader = HiveReader(hive)
        self.interval = refresh
        self.shown: TopSnapshot | None = None
        self._reading = False
        self._task_rows: dict[str, TaskLine] = {}  # the tasks table's rows, by key
        self._fed: tuple[FeedEvent, ...] = ()  # the feed as the log shows it

    def compose(self) -> ComposeResult:
        yield Static("reading the hive…", id="daemon")
        agents: DataTable[Text | str] = DataTable(id="agents", cursor_type="row")
        agents.border_title = "Agents"
        yield agents
        with Horizontal(id="lower"):
            tasks: DataTable[Text | str] = DataTable(id="tasks", cursor_type="row")
            yield tasks
            yield RichLog(id="feed", wrap=False, markup=False, highlight=False)
        yield Footer()

    async def on_mount(self) -> None:
        agents = self.query_one("#agents", DataTable)
        agents.add_columns("agent", "state", "task in hand", "mail", "tokens today",
                           "cost today", "last said")
        tasks = self.query_one("#tasks", DataTable)
        tasks.add_columns("state", "id", "title / reason", "agent", "changed")
        await self.refresh_now()
        self.set_interval(self.interval, self.refresh_now)

    async def refresh_now(self) -> None:
        """Read a snapshot in a worker thread and draw it (one read at a time)."""
        if self._reading:
            return
        self._reading = True
        try:
            snap = await asyncio.to_thread(self.reader.snapshot)
        finally:
            self._reading = False
        self.draw(snap)

    # -- drawing ---------------------------------------------------------------
    def draw(self, snap: TopSnapshot) -> None:
        self.shown = snap
        counts = "  ".join(f"{state} {n:,}" for state, n in snap.counts.items())
        style = "green" if snap.daemon.running else "yellow"
        header = Text.assemble((printable(snap.root), "bold"), "  ",
                               (printable(snap.daemon.text), style), "\n",
                               "tasks: ", counts)
        self.query_one("#daemon", Static).update(header)
        self._draw_agents(snap)
        self._draw_tasks(snap)
        self._draw_feed(snap.feed)

    def _draw_agents(self, snap: TopSnapshot) -> None:
        table: DataTable[Text | str] = self.query_one("#agents", DataTable)
        keep = _selected_key(table)
        table.clear()
        for a in snap.agents:
            state = Text(a.state, style=_STATE_STYLE.get(a.state, ""))
            if a.detail:
                state.append(f" ({printable(a.detail)})", style="dim")
            cost = "—" if a.cost_today is None else f"${a.cost_today:.4f}"
            table.add_row(printable(a.name), state, printable(", ".join(a.tasks)) or "—",
                          str(a.unread or ""), f"{a.tokens_today:,}", cost,
                          Text(printable(a.said[:120])), key=a.name)
        _reselect(table, keep)

    def _draw_tasks(self, snap: TopSnapshot) -> None:
        table: DataTable[Text | str] = self.query_one("#tasks", DataTable)
        keep = _selected_key(table)
        table.clear()
        self._task_rows = {}
        now = datetime.now(UTC)
        for t in snap.tasks:
            what = (Text(printable(t.problem), style="red") if t.problem
                    else Text(printable(t.title)))
            if t.waits:
                what.append(f" (waits: {printable(t.waits)})", style="yellow")
            changed = t.changed_at.astimezone()
            when = changed.strftime("%H:%M:%S" if (now - t.changed_at).days < 1 else "%Y-%m-%d")
            table.add_row(Text(t.state, style=_TASK_STYLE.get(t.state, "")), printable(t.id),
                          what, printable(t.agent), when, key=t.path)
            self._task_rows[t.path] = t
        _reselect(table, keep)

    def _draw_feed(self, feed: tuple[FeedEvent, ...]) -> None:
        log = self.query_one("#feed", RichLog)
        drawn = len(self._fed)
        if feed[:drawn] != self._fed:  # trimmed, or an event came in between: all again
            log.clear()
            drawn = 0
        for e in feed[drawn:]:
            log.write(Text.assemble(
                (e.at.astimezone().strftime("%H:%M:%S "), "dim"),
                (f"{printable(e.agent)} ", "bold"),
                (printable(e.text), _KIND_STYLE.get(e.kind, "")),
            ))
        self._fed = feed

    # -- keys --------------------------------------------------------------------
    def _agent(self) -> str | None:
        return _selected_key(self.query_one("#agents", DataTable))

    async def action_pause(self) -> None:
        agent = self._agent()
        if agent is None or self.shown is None:
            self.notify("no agent selected", severity="warning")
            return
        row = next((a for a in self.shown.agents if a.name == agent), None)
        if row is not None and row.state == "paused" and (why := _not_resumable(row)):
            self.notify(f"{agent} {why}", severity="warning")
            return
        try:
            if row is not None and row.state == "paused":
                await asyncio.to_thread(steering.resume, self.hive, agent)
                done = "resumed"
            else:
                await asyncio.to_thread(steering.pause, self.hive, agent)
                done = "paused"
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"{done} {agent}")  # (the feed tells it from the pause file)
        await self.refresh_now()

    async def action_retry(self) -> None:
        key = _selected_key(self.query_one("#tasks", DataTable))
        row = self._task_rows.get(key or "")
        state, task_id = (row.state, row.id) if row is not None else ("", "")
        if state not in ("failed", "rejected"):
            self.notify("select a failed or rejected task to retry (Tab moves between "
                        "panels)", severity="warning")
            return
        try:
            done = await asyncio.to_thread(steering.retry, self.hive, task_id)
        except UserError as exc:
            self.notify(str(exc), severity="error")
            return
        self._note("you", f"retried {done.id}: back in tasks/")
        self.notify(f"retried {done.id}")
        await self.refresh_now()

    def action_conversation(self) -> None:
        agent = self._agent()
        if agent is None:
            self.notify("no agent selected", severity="warning")
            return
        tail = self.reader.tails.get(agent)
        lines = turns(tail.cycles(CONVERSATION_CYCLES)) if tail else turns([])
        self.push_screen(ConversationScreen(agent, lines))

    def _note(self, agent: str, text: str) -> None:
        self.reader.note(FeedEvent(datetime.now(UTC), agent, "steer", text))


def _not_resumable(row: AgentRow) -> str:
    """Why `resume` would not lift the agent's pause ("" if it would)."""
    if row.detail == DISABLED:
        return "is paused by its ROM (enabled: false): edit its ROM.md to resume it"
    if "budget" in row.detail:
        return ("is paused until tomorrow (UTC): its daily token budget is spent; raise "
                "budget.per_day in its ROM.md")
    return ""


def _selected_key(table: DataTable[Text | str]) -> str | None:
    if not table.row_count:
        return None
    try:
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
    except CellDoesNotExist:  # (a cursor past the rows: no row is selected)
        return None
    return row_key.value


def _reselect(table: DataTable[Text | str], key: str | None) -> None:
    """Keep the cursor on the row it was on (by its key) across a redraw."""
    if key is None:
        return
    try:
        table.move_cursor(row=table.get_row_index(key), animate=False)
    except RowDoesNotExist:  # that row is gone: the cursor stays where the redraw put it
        return
