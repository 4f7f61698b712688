"""One round of tool calls: overlapped where footprints allow, as if run one by one."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from pydantic import BaseModel

from hivemind.agent.cycle import Agent
from hivemind.agent.services import HiveServices
from hivemind.fs.loopflusher import LoopFlusher
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.llm.base import ModelResponse, ToolCall, ToolResult
from hivemind.llm.offline import OfflineProvider
from hivemind.settings import AgentConfig
from hivemind.tools import default_registry
from hivemind.tools.base import ANY, EXCLUSIVE, Footprint, Tool, ToolContext, ToolRegistry
from tests.helpers import fast_config, write_agent, write_task

AGENT = "worker"

# -- Footprint.after -------------------------------------------------------------------

W_FILES = Footprint.of(writes=["files"])
R_FILES = Footprint.of(reads=["files"])
W_MAIL = Footprint.of(writes=["mail"])
R_ANY = Footprint.of(reads=[ANY])
NOTHING = Footprint.of()


@pytest.mark.parametrize(
    ("later", "earlier", "conflict"),
    [
        (W_FILES, W_FILES, False),
        (R_FILES, W_FILES, True),
        (W_FILES, R_FILES, True),
        (R_FILES, R_FILES, False),
        (R_ANY, W_MAIL, True),
        (W_MAIL, R_ANY, True),
        (EXCLUSIVE, W_MAIL, True),
        (W_MAIL, EXCLUSIVE, True),
        (EXCLUSIVE, EXCLUSIVE, True),
        (NOTHING, EXCLUSIVE, False),
        (EXCLUSIVE, NOTHING, False),
        (R_FILES, W_MAIL, False),
        (Footprint.of(reads=["task:a"], writes=["task:a"]),
         Footprint.of(reads=["task:b"], writes=["task:b"]), False),
    ],
    ids=[
        "write-write", "read-after-write", "write-after-read", "read-read",
        "any-read-after-write", "write-after-any-read", "exclusive-after-write",
        "write-after-exclusive", "exclusive-after-exclusive", "empty-after-exclusive",
        "exclusive-after-empty", "different-names", "different-tasks",
    ],
)
def test_footprint_after_says_whether_a_later_call_must_wait(
    later: Footprint, earlier: Footprint, conflict: bool
) -> None:
    assert later.after(earlier) is conflict


def test_a_call_waits_for_the_union_of_earlier_calls_exactly_when_it_waits_for_one() -> None:
    """The round checks a call against what the unfinished calls touch together."""
    names = [ANY, "files", "mail", "task:a", "task:b"]
    rng = random.Random(4)

    def pick() -> Footprint:
        return Footprint.of(reads=rng.sample(names, rng.randint(0, 2)),
                            writes=rng.sample(names, rng.randint(0, 2)))

    for _ in range(2000):
        earlier = [pick() for _ in range(rng.randint(1, 4))]
        later = pick()
        union = Footprint.of()
        for f in earlier:
            union = union.union(f)
        assert later.after(union) is any(later.after(f) for f in earlier)


def footprint(name: str, **args: Any) -> Footprint:
    return default_registry().footprint(ToolCall(id="x", name=name, input=args))


@pytest.mark.parametrize(
    ("later", "earlier", "conflict"),
    [
        (("complete_task", {"task_id": "b"}), ("complete_task", {"task_id": "a"}), False),
        (("complete_task", {"task_id": "a"}), ("complete_task", {"task_id": "a"}), True),
        (("fail_task", {"task_id": "a"}), ("complete_task", {"task_id": "a"}), True),
        (("write_file", {"path": "workspace/x"}), ("send_message", {"to": HUMAN}), False),
        (("send_message", {"to": HUMAN}), ("write_file", {"path": "workspace/x"}), False),
        (("complete_task", {"task_id": "a"}), ("send_message", {"to": HUMAN}), False),
        (("read_file", {"path": "workspace/x"}), ("send_message", {"to": HUMAN}), True),
        (("read_file", {"path": "workspace/x"}), ("write_file", {"path": "workspace/x"}), True),
        (("edit_file", {"path": "workspace/x"}), ("write_file", {"path": "workspace/x"}), True),
        (("write_file", {"path": "workspace/x"}), ("write_file", {"path": "workspace/x"}), False),
        (("read_file", {"path": "workspace/x"}), ("no_such_tool", {}), False),
        (("remember", {"content": "b"}), ("remember", {"content": "a"}), True),
        (("recall", {"query": "b"}), ("remember", {"content": "a"}), True),
        (("remember", {"content": "a"}), ("complete_task", {"task_id": "a"}), True),
    ],
    ids=[
        "complete-other-task", "complete-same-task", "fail-after-complete-same-task",
        "write-after-send", "send-after-write", "complete-after-send", "read-after-send",
        "read-after-write", "edit-after-write", "write-after-write", "read-after-unknown-tool",
        "remember-after-remember", "recall-after-remember", "remember-after-complete",
    ],
)
def test_built_in_tools_declare_what_their_calls_conflict_with(
    later: tuple[str, dict[str, Any]], earlier: tuple[str, dict[str, Any]], conflict: bool
) -> None:
    assert footprint(later[0], **later[1]).after(footprint(earlier[0], **earlier[1])) is conflict


def test_a_tool_that_declares_no_footprint_runs_alone() -> None:
    class NoInput(BaseModel):
        pass

    async def quiet(_ctx: ToolContext, _args: NoInput) -> str:
        return ""

    registry = ToolRegistry([Tool("quiet", "says nothing of itself", NoInput, quiet)])

    assert registry.footprint(ToolCall(id="x", name="quiet")) == EXCLUSIVE


# -- rounds run by the agent ------------------------------------------------------------


def open_agent(hive: Hive, registry: ToolRegistry | None = None) -> Agent:
    """A real agent on the hive, with the offline provider and fsync on (the default)."""
    write_agent(hive, AGENT)
    services = HiveServices.open(hive, OfflineProvider(), fast_config(hive))
    if registry is not None:
        services.tools = registry
    return Agent(AGENT, services)


def claim(agent: Agent, *stems: str) -> None:
    for stem in stems:
        write_task(agent.s.hive, stem)
    board = agent.s.board
    refs = {r.id: r for r in board.scan_pending()}
    for stem in stems:
        assert board.claim(refs[stem], AGENT) is not None


def tool_context(agent: Agent) -> tuple[ToolContext, AgentConfig]:
    """The ToolContext a cycle builds for the agent (see `Agent._think`)."""
    cfg = agent.config()
    assert cfg is not None
    s = agent.s
    ctx = ToolContext(
        hive=s.hive, agent=agent.name, config=cfg, board=s.board, post=s.post,
        working=agent.working, active_tasks={r.id: r for r in s.board.active(agent.name)},
        ltm=s.ltm, on_mail=s.mail_sent, on_task_change=s.task_changed,
    )
    return ctx, cfg


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(id=f"call-{i}", name=name, input=args) for i, (name, args) in enumerate(calls)]


async def run_round(
    agent: Agent, calls: list[ToolCall], log: list[dict[str, Any]] | None = None
) -> list[ToolResult]:
    """The agent runs `calls` as one round of the model's reply."""
    ctx, cfg = tool_context(agent)
    response = ModelResponse(
        tool_calls=calls, stop_reason="tool_use", model="offline", provider="offline"
    )
    return await agent.tool_runner.run_calls(ctx, response, cfg, [] if log is None else log)


def errors(results: list[ToolResult]) -> list[str]:
    return [r.content for r in results if r.is_error]


@pytest.mark.parametrize("before", [None, "old"], ids=["new-file", "replacing-old"])
async def test_a_read_sees_a_write_made_earlier_in_the_same_round(
    hive: Hive, before: str | None
) -> None:
    agent = open_agent(hive)
    if before is not None:
        (hive.workspace_dir / "a.md").write_text(before)

    results = await run_round(agent, tool_calls(
        ("write_file", {"path": "workspace/a.md", "content": "new"}),
        ("read_file", {"path": "workspace/a.md"}),
    ))

    assert errors(results) == []
    assert "new" in results[1].content and "old" not in results[1].content


async def test_a_read_made_again_after_a_write_in_the_round_runs_again(hive: Hive) -> None:
    """Identical calls of a round share one answer, but not across a write of what they
    read: the third read sees the write, the second shares the first's answer."""
    agent = open_agent(hive)
    (hive.workspace_dir / "a.md").write_text("old")

    results = await run_round(agent, tool_calls(
        ("read_file", {"path": "workspace/a.md"}),
        ("read_file", {"path": "workspace/a.md"}),
        ("write_file", {"path": "workspace/a.md", "content": "new"}),
        ("read_file", {"path": "workspace/a.md"}),
    ))

    assert errors(results) == []
    assert [r.tool_use_id for r in results] == [f"call-{i}" for i in range(4)]
    assert results[0].content == results[1].content and "old" in results[0].content
    assert "new" in results[3].content and "old" not in results[3].content


async def test_an_edit_applies_to_a_write_made_earlier_in_the_same_round(hive: Hive) -> None:
    agent = open_agent(hive)

    results = await run_round(agent, tool_calls(
        ("write_file", {"path": "workspace/b.md", "content": "alpha beta"}),
        ("edit_file", {"path": "workspace/b.md", "old": "beta", "new": "gamma"}),
    ))

    assert errors(results) == []
    assert (hive.workspace_dir / "b.md").read_text() == "alpha gamma"


async def test_the_later_of_two_writes_of_one_file_in_a_round_wins(hive: Hive) -> None:
    agent = open_agent(hive)

    results = await run_round(agent, tool_calls(
        ("write_file", {"path": "workspace/c.md", "content": "first, and longer\n" * 50}),
        ("write_file", {"path": "workspace/c.md", "content": "second\n"}),
    ))

    assert errors(results) == []
    assert (hive.workspace_dir / "c.md").read_text() == "second\n"


async def test_completing_one_task_twice_in_a_round_completes_it_once(hive: Hive) -> None:
    agent = open_agent(hive)
    claim(agent, "t1")

    results = await run_round(agent, tool_calls(
        ("complete_task", {"task_id": "t1", "result": "done once"}),
        ("complete_task", {"task_id": "t1", "result": "done twice"}),
    ))

    assert not results[0].is_error, results[0].content
    assert results[1].is_error and "do not hold task 't1'" in results[1].content
    assert sorted(p.name for p in hive.done_dir.iterdir()) == ["t1.md"]
    assert (hive.done_dir / "t1.md").read_text().count("## Result") == 1


def busy_round() -> list[ToolCall]:
    return tool_calls(
        ("send_message", {"to": HUMAN, "subject": "progress", "body": "three tasks, one round"}),
        ("write_file", {"path": "workspace/r1.md", "content": "one"}),
        ("complete_task", {"task_id": "t1", "result": "ok 1"}),
        ("write_file", {"path": "workspace/r2.md", "content": "two"}),
        ("complete_task", {"task_id": "t2", "result": "ok 2"}),
        ("write_file", {"path": "workspace/r3.md", "content": "three"}),
        ("complete_task", {"task_id": "t3", "result": "ok 3"}),
    )


async def test_a_round_of_durable_calls_shares_flushes(hive: Hive) -> None:
    agent = open_agent(hive)
    assert agent.s.config.daemon.fsync
    claim(agent, "t1", "t2", "t3")
    calls = busy_round()
    flusher = LoopFlusher.of(asyncio.get_running_loop())
    trips = flusher.trips

    results = await run_round(agent, calls)

    assert errors(results) == []
    assert 1 <= flusher.trips - trips < len(calls)


async def test_a_round_of_durable_calls_has_every_effect(hive: Hive) -> None:
    agent = open_agent(hive)
    claim(agent, "t1", "t2", "t3")

    results = await run_round(agent, busy_round())

    assert errors(results) == []
    assert sorted(p.name for p in hive.done_dir.iterdir()) == ["t1.md", "t2.md", "t3.md"]
    assert list(hive.active_dir_for(AGENT).glob("*.md")) == []
    assert [(hive.workspace_dir / f"r{i}.md").read_text() for i in (1, 2, 3)] == [
        "one", "two", "three"
    ]
    assert [m.message.subject for m in Mailbox(hive, HUMAN).unread()] == ["progress"]


async def test_results_come_back_in_call_order(hive: Hive) -> None:
    agent = open_agent(hive)
    claim(agent, "t1", "t2", "t3")
    calls = busy_round()

    results = await run_round(agent, calls)

    assert [r.tool_use_id for r in results] == [c.id for c in calls]
    assert [r.content.split()[0] for r in results] == [
        "delivered", "wrote", "task", "wrote", "task", "wrote", "task"
    ]
    assert [r.content.split()[1] for r in results if r.content.startswith("task")] == [
        "t1", "t2", "t3"
    ]


async def test_each_call_is_logged_in_call_order(hive: Hive) -> None:
    agent = open_agent(hive)
    claim(agent, "t1", "t2", "t3")
    calls = busy_round()
    log: list[dict[str, Any]] = [{"name": "from-an-earlier-round"}]

    await run_round(agent, calls, log)

    assert [c["name"] for c in log] == ["from-an-earlier-round", *(c.name for c in calls)]
    assert [c["input"] for c in log[1:]] == [c.input for c in calls]
    assert [c["error"] for c in log[1:]] == [False] * len(calls)


class NoInput(BaseModel):
    pass


async def explode(_ctx: ToolContext, _args: NoInput) -> str:
    raise RuntimeError("a bug in a tool")


async def test_a_tool_bug_is_an_error_result_and_the_rest_of_the_round_runs(
    hive: Hive,
) -> None:
    """A bug in one tool is not the model's doing, but it must not end the cycle as a
    crash retried for ever (#21): the model sees an internal error, the rest runs."""
    registry = ToolRegistry([
        *default_registry().allowed(None),
        Tool("explode", "a tool with a bug", NoInput, explode, touches=lambda _input: NOTHING),
    ])
    agent = open_agent(hive, registry)

    results = await run_round(agent, tool_calls(
        ("write_file", {"path": "workspace/before.md", "content": "before"}),
        ("explode", {}),
        ("write_file", {"path": "workspace/after.md", "content": "after"}),
    ))

    assert [r.is_error for r in results] == [False, True, False]
    assert results[1].content.startswith("internal error in explode: RuntimeError: a bug")
    assert (hive.workspace_dir / "before.md").read_text() == "before"
    assert (hive.workspace_dir / "after.md").read_text() == "after"
