"""What working memory keeps over an agent's life, as the model sees it: pins end with
their task, gone files are shown once, read mail is bounded and shows its body, a
finished task leaves its result."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from hivemind.agent.cycle import Agent
from hivemind.agent.perceive import READ_MAIL_KEPT, matches_any, watched_files
from hivemind.agent.services import HISTORY_KEPT, HiveServices
from hivemind.agent.view import FINISHED_KEPT
from hivemind.clock import utcnow
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.ref import TaskRef
from hivemind.llm.base import ToolCall
from hivemind.memory.blocks import BlockType, ContextBlock, FileBlock, HistoryBlock
from hivemind.memory.earlier import EARLIER_ID, FIRST_KEPT, LINES_KEPT, fold
from hivemind.memory.janitor import MemoryJanitor
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools import default_registry
from hivemind.tools.base import ToolContext
from hivemind.tools.files import PIN_TTL
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import fast_config, write_agent, write_task
from tests.scripted_model import context_entries, is_first_round, provider

AGENT = "worker"


class Life:
    """One agent over a real hive, its model scripted round by round (fake Messages API)."""

    def __init__(self, hive: Hive, api: FakeAnthropic, front: str = "") -> None:
        write_agent(hive, AGENT, front=front)
        self.hive = hive
        self.services = HiveServices.open(hive, provider(api), fast_config(hive))
        self.agent = Agent(AGENT, self.services)
        self.rounds: list[list[dict[str, Any]]] = []
        self.firsts: list[dict[str, Any]] = []
        self.said = "ok, done for now"
        self._n = 0
        api.responder = self._respond

    def _respond(self, body: Any) -> Reply:
        if is_first_round(body):
            self.firsts.append(body)
        calls = self.rounds.pop(0) if self.rounds else []
        if calls:
            return Reply(body=message_body(calls, stop_reason="tool_use"))
        return Reply(body=message_body([{"type": "text", "text": self.said}]))

    def call(self, name: str, **args: Any) -> dict[str, Any]:
        self._n += 1
        return {"type": "tool_use", "id": f"toolu_{self._n}", "name": name, "input": args}

    def task(self, stem: str, body: str = "Do the thing.") -> TaskRef:
        write_task(self.hive, stem, body)
        board = self.services.board
        ref = next(r for r in board.scan_pending() if r.path.stem == stem)
        claimed = board.claim(ref, AGENT)
        assert claimed is not None
        return claimed

    def mail(self, subject: str, body: str = "go on", **fields: Any) -> None:
        self.services.post.send(HUMAN, AGENT, subject, body, **fields)

    async def cycle(self, *rounds: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run one cycle (the model makes `rounds` of calls); the context it was sent."""
        self.rounds = [list(r) for r in rounds]
        before = len(self.firsts)
        await self.agent.cycle()
        assert len(self.firsts) > before, "no model call"
        return context_entries(self.firsts[-1])


@pytest.fixture
def api() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


def ids(entries: list[dict[str, Any]], kind: str) -> list[str]:
    return [e["id"] for e in entries if e["metadata"]["type"] == kind]


def said(entries: list[dict[str, Any]], with_tasks: bool = False) -> list[Any]:
    """What the agent said, as the context shows it (and the tasks it was for)."""
    return [(e["content"], e["metadata"]["task_ids"]) if with_tasks else e["content"]
            for e in entries if e["id"].endswith(":said")]


def entry(entries: list[dict[str, Any]], entry_id: str) -> dict[str, Any]:
    return next(e for e in entries if e["id"] == entry_id)


# -- pins ------------------------------------------------------------------------


async def test_a_pin_made_for_a_task_leaves_the_context_when_the_task_ends(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    (hive.workspace_dir / "data.md").write_text("# Data\n42\n")
    life.task("t1")
    life.mail("go")
    await life.cycle([life.call("read_file", path="workspace/data.md")])
    life.mail("more")
    during = await life.cycle([life.call("complete_task", task_id="t1", result="42")])
    assert "workspace/data.md" in ids(during, "file")

    life.task("t2", "When should I plant tomatoes?")
    after = await life.cycle()

    assert ids(after, "file") == []


def tool_context(hive: Hive) -> ToolContext:
    """read_file's context for an agent that holds no task."""
    write_agent(hive, AGENT)
    return ToolContext(
        hive=hive, agent=AGENT, config=AgentConfig(name=AGENT),
        board=TaskBoard(hive, settle_time=0), post=PostOffice(hive),
        working=WorkingMemoryManager(), active_tasks={},
    )


async def read(ctx: ToolContext, **args: Any) -> None:
    result = await default_registry().execute(ctx, ToolCall(id="c", name="read_file", input=args))
    assert not result.is_error, result.content


def file_blocks(ctx: ToolContext) -> dict[str, FileBlock]:
    return {b.id: b for b in ctx.working.by_type(BlockType.FILE) if isinstance(b, FileBlock)}


async def test_a_pin_made_with_no_task_held_expires_after_its_hour(hive: Hive) -> None:
    (hive.workspace_dir / "notes.md").write_text("remember this\n")
    ctx = tool_context(hive)

    await read(ctx, path="workspace/notes.md")

    pin = file_blocks(ctx)["workspace/notes.md"]
    assert pin.expiry is not None
    assert abs((pin.expiry - (utcnow() + PIN_TTL)).total_seconds()) < 60
    janitor = MemoryJanitor()
    assert janitor.sweep(ctx.working, utcnow() + PIN_TTL - timedelta(minutes=1)) == []
    assert janitor.sweep(ctx.working, utcnow() + PIN_TTL) == ["workspace/notes.md"]


async def test_a_whole_file_pin_replaces_the_range_pins_of_that_file(hive: Hive) -> None:
    (hive.workspace_dir / "notes.md").write_text("".join(f"line {i}\n" for i in range(1, 40)))
    ctx = tool_context(hive)

    await read(ctx, path="workspace/notes.md", start_line=10, end_line=12)
    await read(ctx, path="workspace/notes.md", start_line=20, end_line=22)
    await read(ctx, path="workspace/notes.md")
    await read(ctx, path="workspace/notes.md", start_line=5, end_line=6)

    assert list(file_blocks(ctx)) == ["workspace/notes.md"]


async def test_reading_an_unchanged_file_again_keeps_its_block_and_timestamp(
    hive: Hive,
) -> None:
    (hive.workspace_dir / "a.md").write_text("# A\n")
    ctx = tool_context(hive)
    await read(ctx, path="workspace/a.md")
    first = file_blocks(ctx)["workspace/a.md"]

    await read(ctx, path="workspace/a.md")

    again = file_blocks(ctx)["workspace/a.md"]
    assert again.timestamp == first.timestamp
    assert again.model_dump(exclude={"expiry"}) == first.model_dump(exclude={"expiry"})


async def test_rereading_a_file_leaves_the_cached_prefix_byte_identical(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    (hive.workspace_dir / "a.md").write_text("# A\n" + "text\n" * 30)
    life.task("t1")
    life.mail("m0")
    await life.cycle([life.call("read_file", path="workspace/a.md")])
    # The entries show their time to the second: the next read comes in a later one.
    await asyncio.sleep(1.01 - time.time() % 1)
    life.mail("m1")
    await life.cycle([life.call("read_file", path="workspace/a.md")])
    life.mail("m2")
    await life.cycle()
    stable = [body["messages"][0]["content"][0] for body in life.firsts[1:]]
    assert all(part.get("cache_control") for part in stable)
    assert stable[0]["text"] == stable[1]["text"]
    assert json.loads(stable[1]["text"] + "]")[-1]["id"] == "workspace/a.md"


@pytest.mark.parametrize("how", ["deleted", "replaced-by-a-folder"])
async def test_a_pinned_file_that_is_gone_is_shown_once_then_dropped(
    hive: Hive, api: FakeAnthropic, how: str
) -> None:
    life = Life(hive, api)
    notes = hive.workspace_dir / "notes.md"
    notes.write_text("".join(f"line {i}\n" for i in range(1, 20)))
    life.task("t1")
    life.mail("go")
    await life.cycle([life.call("read_file", path="workspace/notes.md")])
    notes.unlink()
    if how == "replaced-by-a-folder":
        notes.mkdir()

    life.mail("again")
    shown = await life.cycle()
    life.mail("once more")
    later = await life.cycle()

    assert entry(shown, "workspace/notes.md")["content"].startswith(
        ("[file not found", "[file unreadable")
    )
    assert ids(later, "file") == []


# -- watched files -----------------------------------------------------------------


async def test_a_watched_file_that_is_deleted_leaves_the_context(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api, front="watch: ['workspace/watched/*.md']\n")
    folder = hive.workspace_dir / "watched"
    folder.mkdir()
    (folder / "w1.md").write_text("one\n")
    life.mail("go")
    before = await life.cycle()
    (folder / "w1.md").unlink()
    (folder / "w2.md").write_text("two\n")

    life.mail("again")
    after = await life.cycle()

    assert ids(before, "file") == ["workspace/watched/w1.md"]
    assert ids(after, "file") == ["workspace/watched/w2.md"]


@pytest.mark.parametrize("pattern", ["workspace/**", "workspace/**/*.md", "**/*.md"])
async def test_a_watch_glob_keeps_in_view_the_files_that_wake_the_agent(
    hive: Hive, api: FakeAnthropic, pattern: str
) -> None:
    life = Life(hive, api, front=f"watch: ['{pattern}']\n")
    (hive.workspace_dir / "sub").mkdir()
    (hive.workspace_dir / "w.md").write_text("top\n")
    (hive.workspace_dir / "sub" / "x.md").write_text("below\n")
    life.mail("go")

    seen = await life.cycle()

    assert {"workspace/w.md", "workspace/sub/x.md"} <= set(ids(seen, "file"))
    assert not any(i.startswith("mailboxes/") for i in ids(seen, "file"))
    for path in watched_files(hive, [pattern]):
        assert matches_any(hive.relative(path), [pattern])


# -- mail ----------------------------------------------------------------------------


async def test_at_most_the_newest_read_mails_stay_in_view(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    last = READ_MAIL_KEPT + 4
    for n in range(last + 1):
        life.mail(f"step {n}", f"please handle step {n}")
        seen = await life.cycle()

    messages = [e for e in seen if e["metadata"]["type"] == "message"]
    # `read` is left out while false
    read = {e["metadata"]["subject"] for e in messages if e["metadata"].get("read")}
    unread = {e["metadata"]["subject"] for e in messages if not e["metadata"].get("read")}
    assert unread == {f"step {last}"}
    assert read == {f"step {n}" for n in range(last - READ_MAIL_KEPT, last)}


async def test_a_message_is_shown_as_its_body_with_who_what_and_thread_as_metadata(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    life.mail("re: budget", "Which invoice was that?", thread="budget-2026",
              in_reply_to="m-41")

    seen = await life.cycle()

    [mail] = [e for e in seen if e["metadata"]["type"] == "message"]
    assert mail["content"] == "Which invoice was that?"
    meta = mail["metadata"]
    assert (meta["from"], meta["subject"]) == (HUMAN, "re: budget")
    assert (meta["thread"], meta["in_reply_to"]) == ("budget-2026", "m-41")
    assert meta["timestamp"]


# -- what a finished task leaves --------------------------------------------------------


async def test_a_finished_task_leaves_a_short_form_of_its_result(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    life.task("q1", "Answer the budget question.")
    life.task("q2", "Write the long report.")
    life.mail("budget question", "How much did we spend on cloud in March?")
    await life.cycle([
        life.call("complete_task", task_id="q1",
                  result="We spent 12,345 EUR on cloud in March\n(invoice INV-778)."),
        life.call("fail_task", task_id="q2", reason="the report needs data " * 20),
    ])
    life.mail("re: budget question", "Which invoice was that again?")

    seen = await life.cycle()

    summary = entry(seen, "context:finished")["content"].splitlines()
    assert summary[1] == "- q1: done — We spent 12,345 EUR on cloud in March (invoice INV-778)."
    assert summary[2].startswith("- q2: failed — the report needs data the report")
    assert summary[2].endswith("…") and len(summary[2]) <= len("- q2: failed — ") + 150


async def test_what_the_agent_said_is_compacted_with_the_tasks_it_held(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    life.task("t1")
    life.said = "working on t1 now"
    life.mail("go")
    await life.cycle()
    life.said = "nothing to add"
    life.mail("finish")
    during = await life.cycle([life.call("complete_task", task_id="t1", result="done it")])
    life.mail("hello")

    after = await life.cycle()

    assert said(during, with_tasks=True) == [("said: working on t1 now", ["t1"])]
    assert said(after) == []


async def test_the_finished_summary_grows_at_its_end_and_is_cut_by_half_at_once(
    hive: Hive, api: FakeAnthropic
) -> None:
    # Between cuts, the request before the summary's end stays a cacheable prefix.
    life = Life(hive, api)
    for n in range(FINISHED_KEPT + 2):
        life.task(f"q{n:02d}")
    life.mail("go")
    await life.cycle([life.call("complete_task", task_id=f"q{n:02d}", result=f"r{n}")
                      for n in range(FINISHED_KEPT)])
    summaries = []
    for n in (FINISHED_KEPT, FINISHED_KEPT + 1):
        life.mail(f"next {n}")
        seen = await life.cycle([life.call("complete_task", task_id=f"q{n:02d}", result=f"r{n}")])
        summaries.append(entry(seen, "context:finished")["content"])
    life.mail("last")
    summaries.append(entry(await life.cycle(), "context:finished")["content"])

    full, cut, grown = (s.splitlines()[1:] for s in summaries)
    assert full == [f"- q{n:02d}: done — r{n}" for n in range(FINISHED_KEPT)]
    assert cut == [f"- q{n:02d}: done — r{n}"
                   for n in range(FINISHED_KEPT + 1 - FINISHED_KEPT // 2, FINISHED_KEPT + 1)]
    assert grown == [*cut, f"- q{FINISHED_KEPT + 1:02d}: done — r{FINISHED_KEPT + 1}"]


# -- a long task's early steps ---------------------------------------------------------


async def test_a_long_tasks_first_steps_stay_in_view_after_the_janitor_lets_them_go(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    for n in range(40):
        (hive.workspace_dir / f"mod{n:02d}.md").write_text(f"module {n}\n")
    life.task("t1", "Plan and build the service.")
    life.mail("go")
    await life.cycle([life.call("send_message", to=HUMAN, subject="plan",
                                body="I will use postgres 16 (DECISION-XYZ)")])
    for n in range(HISTORY_KEPT + 10):  # one step a cycle: the first ones are long gone
        life.mail(f"step {n}")
        await life.cycle([life.call("read_file", path=f"workspace/mod{n:02d}.md")])
    life.mail("re: plan", "Why did you pick that database again?")

    seen = await life.cycle()

    history = " ".join(e["content"] for e in seen if e["metadata"]["type"] == "history")
    assert "DECISION-XYZ" not in history  # its HISTORY block went long ago...
    earlier = entry(seen, EARLIER_ID)["content"].splitlines()
    assert "DECISION-XYZ" in earlier[1] and earlier[1].startswith("- [t1] send_message: ")
    assert len(earlier) <= 1 + LINES_KEPT + 1  # heading, lines, the marker

    life.mail("done?")
    await life.cycle([life.call("complete_task", task_id="t1", result="built")])
    life.mail("thanks")
    after = await life.cycle()
    assert EARLIER_ID not in [e["id"] for e in after]  # ended with its task


def test_earlier_steps_keep_the_first_and_the_newest_and_count_those_between() -> None:
    manager = WorkingMemoryManager()
    start = utcnow()
    steps = [HistoryBlock(action="read_file", detail=f"step {n}", timestamp=start
                          + timedelta(seconds=n), metadata={"task_ids": ["t1"]})
             for n in range(60)]
    for step in steps:  # one at a time, as the janitor lets them go
        fold(manager, [step])

    block = manager.get(EARLIER_ID)
    assert isinstance(block, ContextBlock)
    lines = block.summary.splitlines()[1:]
    assert lines[:FIRST_KEPT] == [f"- [t1] read_file: step {n}" for n in range(FIRST_KEPT)]
    assert lines[-1] == "- [t1] read_file: step 59"
    assert len(lines) <= LINES_KEPT + 1
    [marker] = [ln for ln in lines if "more steps" in ln]
    shown = len(lines) - 1
    assert marker == f"- [t1] [… {60 - shown} more steps …]"
    fold(manager, [HistoryBlock(action="said", detail="hi", metadata={"task_ids": []})])
    assert manager.get(EARLIER_ID) is block  # a step for no task is not kept


async def test_a_step_for_two_tasks_goes_when_the_second_ends_too(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    life.task("t1")
    life.task("t2")
    life.said = "working on both"
    life.mail("go")
    await life.cycle()
    life.said = "one done"
    life.mail("first")
    await life.cycle([life.call("complete_task", task_id="t1", result="ok")])
    life.said = ""
    life.mail("second")
    during = await life.cycle([life.call("complete_task", task_id="t2", result="ok")])
    life.mail("hello")

    after = await life.cycle()

    assert "said: working on both" in said(during)
    assert said(after) == []


async def test_steps_of_a_task_taken_away_are_not_shown_to_the_next_cycle(
    hive: Hive, api: FakeAnthropic
) -> None:
    life = Life(hive, api)
    (hive.workspace_dir / "data.md").write_text("# Data\n42\n")
    held = life.task("t1")
    life.mail("go")
    await life.cycle([life.call("write_file", path="workspace/out.md", content="t1 draft")])
    held.path.rename(hive.done_dir / held.path.name)  # a person finished it by hand
    life.mail("something else")

    seen = await life.cycle()

    history = [e["content"] for e in seen if e["metadata"]["type"] == "history"]
    assert not any("t1 draft" in h for h in history), history


async def test_a_read_step_names_what_was_read_whose_text_stays_in_view(
    hive: Hive, api: FakeAnthropic
) -> None:
    """A read_file step's entry said the first 200 characters of the text again, next to
    the pinned file that shows it whole: it says what was read, once."""
    life = Life(hive, api)
    (hive.workspace_dir / "data.md").write_text("# Data\n\nThe figure is 42.\n")
    life.task("t1")
    life.mail("go")
    await life.cycle([life.call("read_file", path="workspace/data.md")])
    life.mail("more")
    seen = await life.cycle()
    [step] = [e for e in seen if e["id"].endswith(":read_file")]
    assert step["content"] == ('read_file: {"path":"workspace/data.md"} -> '
                               "workspace/data.md (lines 1-3 of 3)")
    assert "The figure is 42." in entry(seen, "workspace/data.md")["content"]
