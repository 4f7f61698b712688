"""Agent tools on a real temporary hive: confinement, errors as results, effects."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.hive.tasks.board import TaskBoard
from hivemind.llm.base import ToolCall
from hivemind.memory.blocks import BlockType
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.settings import TOOL_NAMES, AgentConfig
from hivemind.tools import default_registry, filewalk
from hivemind.tools.base import ToolContext
from tests.helpers import write_agent, write_task


def make_ctx(hive: Hive, agent: str = "worker", tools: list[str] | None = None) -> ToolContext:
    write_agent(hive, agent)
    board = TaskBoard(hive, settle_time=0)
    active = {r.task.id: r for r in board.active(agent)}
    return ToolContext(
        hive=hive,
        agent=agent,
        config=AgentConfig(name=agent, tools=tools),
        board=board,
        post=PostOffice(hive),
        working=WorkingMemoryManager(),
        active_tasks=active,
    )


async def call(ctx: ToolContext, name: str, **args: object) -> tuple[str, bool]:
    result = await default_registry().execute(ctx, ToolCall(id="c1", name=name, input=args))
    return result.content, result.is_error


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "/etc/passwd", "workspace/../../outside.txt", ".hivemind/status.json",
     "mailboxes/other/new/x.md", "agents/other/ROM.md", "tasks/x.md"],
    ids=["dotdot", "absolute", "nested-dotdot", "runtime-state", "mailbox", "rom", "tasks"],
)
async def test_write_outside_workspace_and_knowledge_is_refused(hive: Hive, path: str) -> None:
    ctx = make_ctx(hive)
    content, is_error = await call(ctx, "write_file", path=path, content="x")
    assert is_error
    assert "outside" in content or "not allowed" in content or "refused" in content


async def test_symlink_pointing_out_of_the_hive_is_refused(hive: Hive, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    os.symlink(secret, hive.workspace_dir / "link.txt")
    ctx = make_ctx(hive)
    content, is_error = await call(ctx, "read_file", path="workspace/link.txt")
    assert is_error and "top secret" not in content
    _, is_error = await call(ctx, "write_file", path="workspace/link.txt", content="x")
    assert is_error
    assert secret.read_text() == "top secret"


async def test_hard_link_to_a_file_outside_is_not_written(hive: Hive, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("original")
    os.link(outside, hive.workspace_dir / "hard.txt")
    ctx = make_ctx(hive)
    _, is_error = await call(ctx, "write_file", path="workspace/hard.txt", content="changed")
    assert is_error
    assert outside.read_text() == "original"


async def test_write_then_read_pins_a_file_block(hive: Hive) -> None:
    ctx = make_ctx(hive)
    content, is_error = await call(ctx, "write_file", path="workspace/a.md", content="l1\nl2\nl3\n")
    assert not is_error and ctx.effects.files_written == ["workspace/a.md"]
    content, is_error = await call(
        ctx, "read_file", path="workspace/a.md", start_line=2, end_line=3
    )
    assert not is_error
    assert "l2" in content and "l1" not in content
    ids = [b.id for b in ctx.working.by_type(BlockType.FILE)]
    assert ids == ["workspace/a.md:2-3"]


async def test_edit_file_needs_exactly_one_occurrence(hive: Hive) -> None:
    ctx = make_ctx(hive)
    (hive.workspace_dir / "e.md").write_text("a b a")
    content, is_error = await call(ctx, "edit_file", path="workspace/e.md", old="a", new="c")
    assert is_error and "2 times" in content
    _, is_error = await call(ctx, "edit_file", path="workspace/e.md", old="b", new="c")
    assert not is_error
    assert (hive.workspace_dir / "e.md").read_text() == "a c a"


async def test_search_and_list_are_bounded_to_the_folder(hive: Hive) -> None:
    ctx = make_ctx(hive)
    (hive.workspace_dir / "s.md").write_text("alpha\nbeta\nalphabet\n")
    content, is_error = await call(ctx, "search_files", pattern="^alpha", path="workspace")
    assert not is_error
    assert content.splitlines() == ["workspace/s.md:1: alpha", "workspace/s.md:3: alphabet"]
    content, _ = await call(ctx, "list_files", path="workspace")
    assert "workspace/s.md" in content
    _, is_error = await call(ctx, "search_files", pattern="x", path="mailboxes")
    assert is_error


async def test_unknown_tool_and_invalid_input_are_errors_not_exceptions(hive: Hive) -> None:
    ctx = make_ctx(hive)
    content, is_error = await call(ctx, "rm_rf", path="/")
    assert is_error and "unknown tool" in content
    content, is_error = await call(ctx, "write_file", path="workspace/x.md")
    assert is_error and "content" in content
    content, is_error = await call(ctx, "search_files", pattern="(")
    assert is_error and "invalid pattern" in content


async def test_rom_allow_list_hides_other_tools(hive: Hive) -> None:
    ctx = make_ctx(hive, tools=["send_message"])
    content, is_error = await call(ctx, "write_file", path="workspace/x.md", content="x")
    assert is_error and "unknown tool" in content
    assert [s.name for s in default_registry().specs(["send_message"])] == ["send_message"]


async def test_send_message_sets_from_to_the_agent(hive: Hive) -> None:
    ctx = make_ctx(hive)
    write_agent(hive, "other")
    _, is_error = await call(ctx, "send_message", to="other", subject="hi", body="hello",
                             **{"from": "human"})
    assert not is_error
    [item] = Mailbox(hive, "other").unread()
    assert item.message.from_ == "worker"


async def test_send_message_to_unknown_recipient_is_an_error(hive: Hive) -> None:
    ctx = make_ctx(hive)
    content, is_error = await call(ctx, "send_message", to="nobody", body="x")
    assert is_error and "nobody" in content


async def test_agent_cannot_complete_a_task_it_does_not_hold(hive: Hive) -> None:
    write_agent(hive, "other")
    write_task(hive, "theirs")
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.scan_pending()
    assert board.claim(ref, "other") is not None
    ctx = make_ctx(hive)
    content, is_error = await call(ctx, "complete_task", task_id="theirs", result="mine now")
    assert is_error and "do not hold" in content
    assert (hive.active_dir_for("other") / "theirs.md").exists()


async def test_complete_task_appends_result_and_tells_reply_to(hive: Hive) -> None:
    write_task(hive, "t1", front="reply_to: human\n")
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.scan_pending()
    board.claim(ref, "worker")
    ctx = make_ctx(hive)
    _, is_error = await call(ctx, "complete_task", task_id="t1", result="All done.")
    assert not is_error
    assert "All done." in (hive.done_dir / "t1.md").read_text()
    [note] = Mailbox(hive, "human").unread()
    assert note.message.subject.startswith("[done]") and note.message.task == "t1"


async def test_create_task_delegates_with_reply_to_the_creator(hive: Hive) -> None:
    ctx = make_ctx(hive, agent="lead")
    write_agent(hive, "helper")
    content, is_error = await call(ctx, "create_task", title="Check the numbers",
                                   body="Please.", assignee="helper")
    assert not is_error, content
    [ref] = TaskBoard(hive, settle_time=0).scan_pending()
    assert ref.task.assignee == "helper" and ref.task.reply_to == "lead"


def test_the_tool_names_a_rom_may_allow_are_the_registrys() -> None:
    assert default_registry().names == list(TOOL_NAMES)


def crowded_workspace(hive: Hive, monkeypatch: pytest.MonkeyPatch, first: str, text: str) -> None:
    """workspace/<first> holding `text`, then workspace/crowd/ of ten such files, in a
    walk that finds a folder of more than five entries too big to read."""
    monkeypatch.setattr(filewalk, "MAX_FOLDER_ENTRIES", 5)
    (hive.workspace_dir / first).write_text(text)
    crowd = hive.workspace_dir / "crowd"
    crowd.mkdir()
    for i in range(10):
        (crowd / f"f{i}{Path(first).suffix}").write_text(text)
