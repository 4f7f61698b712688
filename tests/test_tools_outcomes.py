"""What the tools do when they succeed: fail_task's retry and final failure, write_file
then edit_file in knowledge/, a ROM's tool allow-list as the model sees it, and the
default max_steps, on real hives (directly, and through cycles with the real SDK
against the fake Messages API)."""

from __future__ import annotations

import json
from typing import Any

from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.base import ToolCall
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import AgentConfig
from hivemind.tools import default_registry
from hivemind.tools.base import ToolContext
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import provider, scripted, tool_use


def make_ctx(hive: Hive, agent: str = "worker") -> ToolContext:
    """A tool context for `agent`, holding the tasks it has claimed on the real board."""
    if not hive.rom_path(agent).exists():
        write_agent(hive, agent)
    board = TaskBoard(hive, settle_time=0)
    return ToolContext(
        hive=hive, agent=agent, config=AgentConfig(name=agent), board=board,
        post=PostOffice(hive), working=WorkingMemoryManager(),
        active_tasks={r.task.id: r for r in board.active(agent)},
    )


def claim(hive: Hive, stem: str, agent: str = "worker") -> None:
    board = TaskBoard(hive, settle_time=0)
    [ref] = [r for r in board.scan_pending() if r.task.id == stem]
    assert board.claim(ref, agent) is not None


async def call(ctx: ToolContext, name: str, **args: object) -> tuple[str, bool]:
    result = await default_registry().execute(ctx, ToolCall(id="c1", name=name, input=args))
    return result.content, result.is_error


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last turn."""
    last = body["messages"][-1]["content"]
    return [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else json.dumps(content)


def cycles(hive: Hive, agent: str = "worker") -> list[dict[str, Any]]:
    lines = hive.audit_path(agent).read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "cycle"]


# -- 1. fail_task ----------------------------------------------------------------------


async def test_fail_task_with_attempts_left_puts_the_task_back_pending(hive: Hive) -> None:
    write_task(hive, "t1", front="reply_to: human\nmax_attempts: 3\n")
    claim(hive, "t1")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "fail_task", task_id="t1", reason="the input is missing")

    assert not is_error, content
    assert content == "task t1 failed; now pending"
    assert not (hive.active_dir_for("worker") / "t1.md").exists()
    assert not (hive.failed_dir / "t1.md").exists()
    text = (hive.tasks_dir / "t1.md").read_text()
    assert "## Attempt 1 failed\n\nthe input is missing" in text
    [ref] = TaskBoard(hive, settle_time=0).scan_pending()
    assert ref.task.id == "t1" and ref.task.attempts == 1 and ref.task.agent is None
    assert ctx.effects.tasks_failed == ["t1"] and "t1" not in ctx.active_tasks
    [note] = Mailbox(hive, HUMAN).unread()
    assert note.message.subject.startswith("[failed]")
    assert note.message.task == "t1" and note.message.from_ == "worker"
    assert "the input is missing" in note.message.body


async def test_fail_task_on_the_last_attempt_moves_it_to_failed(hive: Hive) -> None:
    write_task(hive, "t1", front="reply_to: human\nmax_attempts: 1\n")
    claim(hive, "t1")
    ctx = make_ctx(hive)

    content, is_error = await call(ctx, "fail_task", task_id="t1", reason="cannot be done")

    assert not is_error, content
    assert content == "task t1 failed; now failed"
    assert not (hive.tasks_dir / "t1.md").exists()
    assert not (hive.active_dir_for("worker") / "t1.md").exists()
    text = (hive.failed_dir / "t1.md").read_text()
    assert "## Attempt 1 failed\n\ncannot be done" in text
    assert "status: failed" in text
    [note] = Mailbox(hive, HUMAN).unread()
    assert note.message.subject.startswith("[failed]") and note.message.task == "t1"


async def test_fail_task_tells_the_creator_when_there_is_no_reply_to(hive: Hive) -> None:
    write_agent(hive, "lead")
    write_task(hive, "sum-it", front="created_by: lead\n")
    claim(hive, "sum-it")
    ctx = make_ctx(hive)

    _, is_error = await call(ctx, "fail_task", task_id="sum-it", reason="no numbers given")

    assert not is_error
    [note] = Mailbox(hive, "lead").unread()
    assert note.message.subject.startswith("[failed]") and note.message.task == "sum-it"
    assert "no numbers given" in note.message.body
    assert Mailbox(hive, HUMAN).unread() == []


def test_fail_task_through_cycles_retries_then_lands_in_failed(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", front="reply_to: human\nmax_attempts: 2\n")
    with FakeAnthropic() as api:
        api.responder = scripted(
            [tool_use(1, "fail_task", task_id="t1", reason="first: the source is down")],
            [tool_use(2, "fail_task", task_id="t1", reason="second: still down")],
        )
        run_until_idle(hive, provider(api))
        requests = len(api.message_requests)

    # Each fail_task ended the last task held: its cycle ends without a closing call.
    assert requests == 2
    first, second = (r["tool_calls"] for r in cycles(hive))
    assert [c["result"] for c in first] == ["task t1 failed; now pending"]
    assert [c["result"] for c in second] == ["task t1 failed; now failed"]
    assert not any(c["error"] for c in first + second)
    text = (hive.failed_dir / "t1.md").read_text()
    assert "## Attempt 1 failed\n\nfirst: the source is down" in text
    assert "## Attempt 2 failed\n\nsecond: still down" in text
    assert not (hive.tasks_dir / "t1.md").exists()
    notes = Mailbox(hive, HUMAN).unread()
    assert len(notes) == 2  # one per attempt: a distinct notice id each time
    assert all(n.message.subject.startswith("[failed]") and n.message.task == "t1"
               for n in notes)
    assert [r["effects"]["tasks_failed"] for r in cycles(hive)] == [["t1"], ["t1"]]


# -- 2. write_file then edit_file in knowledge/ ----------------------------------------


async def test_write_then_edit_a_knowledge_file(hive: Hive) -> None:
    ctx = make_ctx(hive)
    path = hive.knowledge_dir / "notes" / "bees.md"

    content, is_error = await call(ctx, "write_file", path="knowledge/notes/bees.md",
                                   content="# Bees\n\nBees make wax.\n")
    assert not is_error, content
    assert path.read_text() == "# Bees\n\nBees make wax.\n"

    content, is_error = await call(ctx, "edit_file", path="knowledge/notes/bees.md",
                                   old="make wax", new="make honey and wax")
    assert not is_error, content
    assert content == "edited knowledge/notes/bees.md"
    assert path.read_text() == "# Bees\n\nBees make honey and wax.\n"
    assert ctx.effects.files_written == ["knowledge/notes/bees.md"] * 2


async def test_edit_with_an_absent_old_string_is_an_error_and_changes_nothing(
    hive: Hive,
) -> None:
    ctx = make_ctx(hive)
    path = hive.knowledge_dir / "facts.md"
    path.write_text("alpha\nbeta\n")

    content, is_error = await call(ctx, "edit_file", path="knowledge/facts.md",
                                   old="gamma", new="delta")

    assert is_error
    assert "0 times" in content and "knowledge/facts.md" in content
    assert path.read_text() == "alpha\nbeta\n"
    assert ctx.effects.files_written == []


async def test_edit_with_an_old_string_found_twice_is_an_error_and_changes_nothing(
    hive: Hive,
) -> None:
    ctx = make_ctx(hive)
    path = hive.knowledge_dir / "facts.md"
    path.write_text("same line\nother\nsame line\n")

    content, is_error = await call(ctx, "edit_file", path="knowledge/facts.md",
                                   old="same line", new="changed")

    assert is_error
    assert "2 times" in content and "exactly once" in content
    assert path.read_text() == "same line\nother\nsame line\n"
    assert ctx.effects.files_written == []


# -- 3. a ROM's tools: allow-list -------------------------------------------------------


def test_rom_tool_allow_list_is_what_the_model_gets_and_enforced(hive: Hive) -> None:
    write_agent(hive, "worker", front="tools: [send_message, complete_task]\n")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = scripted(
            [tool_use(1, "write_file", path="workspace/x.md", content="sneaky")],
            [tool_use(2, "complete_task", task_id="t1", result="done without files")],
        )
        run_until_idle(hive, provider(api))
        bodies = [r.body for r in api.message_requests]

    assert sorted(t["name"] for t in bodies[0]["tools"]) == ["complete_task", "send_message"]
    [refused] = tool_results(bodies[1])
    assert refused["is_error"] is True
    assert "unknown tool 'write_file'" in result_text(refused)
    assert not (hive.workspace_dir / "x.md").exists()
    assert len(bodies) == 2  # complete_task ended the last task: no closing call
    assert "done without files" in (hive.done_dir / "t1.md").read_text()
    [record] = cycles(hive)  # the refusal did not end the cycle
    assert [c["error"] for c in record["tool_calls"]] == [True, False]


# -- 4. the default max_steps ----------------------------------------------------------


def test_default_max_steps_is_eight_rounds(hive: Hive) -> None:
    # No max_steps in the ROM, none in hive.toml; the task's ceiling ends it after one cycle.
    write_agent(hive, "worker", front="max_rounds_per_task: 8\n")
    write_task(hive, "t1")
    counter = iter(range(1000))

    def restless(_body: Any) -> Reply:
        n = next(counter)
        call = tool_use(n, "search_files", pattern=f"never-{n}")
        return Reply(body=message_body([call], stop_reason="tool_use"))

    with FakeAnthropic() as api:
        api.responder = restless
        run_until_idle(hive, provider(api))
        requests = len(api.message_requests)

    assert requests == 8
    [record] = cycles(hive)
    assert len(record["tool_calls"]) == 8
    assert "max_rounds_per_task=8" in (hive.failed_dir / "t1.md").read_text()


# -- what a careless model's calls get (an audit's findings) ------------------------------


async def test_mail_to_itself_or_to_no_one_is_refused(hive: Hive) -> None:
    """Its own mail would wake it again each cycle, a model call each time."""
    ctx = make_ctx(hive)
    text, error = await call(ctx, "send_message", to="worker", body="note to self")
    assert error and text == "you cannot send mail to yourself; keep notes in workspace/ instead"
    text, error = await call(ctx, "send_message", to=["human", "worker"], body="both")
    assert error and Mailbox(hive, HUMAN).unread() == []
    text, error = await call(ctx, "send_message", to=[], body="nobody")
    assert error and text.startswith("no recipient")


async def test_a_task_whose_requester_is_no_agent_still_ends(hive: Hive) -> None:
    """reply_to misspelt (or an agent removed since): the task could never be completed
    or failed; now it ends, and the notice goes to human, saying why."""
    write_task(hive, "t1", front="reply_to: alice\n")
    claim(hive, "t1")
    ctx = make_ctx(hive)

    text, error = await call(ctx, "complete_task", task_id="t1", result="all good")

    assert not error, text
    assert (hive.done_dir / "t1.md").is_file()
    [notice] = Mailbox(hive, HUMAN).unread()
    assert notice.message.subject.startswith("[done]")
    assert notice.message.body.startswith("(Task t1 asked to tell 'alice', which is no agent")


async def test_no_notice_is_sent_for_a_task_that_does_not_end(hive: Hive) -> None:
    """A person moved the claimed task back: complete_task fails, and the requester is
    not told it is done (the notice went out before the check)."""
    write_agent(hive, "other")
    write_task(hive, "t1", front="reply_to: other\n")
    claim(hive, "t1")
    ctx = make_ctx(hive)
    (hive.active_dir_for("worker") / "t1.md").rename(hive.tasks_dir / "t1.md")

    text, error = await call(ctx, "complete_task", task_id="t1", result="all good")

    assert error and "no longer claimed by worker (now: tasks/t1.md)" in text
    assert Mailbox(hive, "other").unread() == []


async def test_create_task_refuses_dependencies_that_can_never_be_met(hive: Hive) -> None:
    ctx = make_ctx(hive)
    text, error = await call(ctx, "create_task", title="Loop me", depends_on=["loop-me"])
    assert error and text == "task loop-me cannot depend on itself"
    text, error = await call(ctx, "create_task", title="Odd", depends_on=["../x"])
    assert error and text.startswith("depends_on: id must be a plain file name")
    # A waits for b (not on the board yet); b, created next, may not wait for a.
    text, error = await call(ctx, "create_task", title="A", depends_on=["b"])
    assert not error
    assert text.endswith("it waits until b is done, and no such task is on the board yet "
                         "(create it, or fix the id)")
    text, error = await call(ctx, "create_task", title="B", depends_on=["a"])
    assert error and text == "depends_on a, which waits for b itself: neither could ever start"
    assert sorted(p.stem for p in hive.tasks_dir.glob("*.md")) == ["a"]
