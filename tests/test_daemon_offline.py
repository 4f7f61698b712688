"""The daemon end to end with the offline provider, on real temporary hives."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from hivemind.agent.cycle import Agent
from hivemind.agent.services import HiveServices
from hivemind.daemon.configwatch import read_hive_toml
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.lock import HiveLock
from hivemind.daemon.status import RunSnapshot, StatusWriter
from hivemind.daemon.status_file import DaemonStatus
from hivemind.errors import HiveLockedError, LockUnavailableError, ModelConnectionError
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.hive.taskcontrol import reassign
from hivemind.llm.base import ModelRequest, ModelResponse
from tests.helpers import (
    CountingProvider,
    fast_config,
    run_until_idle,
    until,
    write_agent,
    write_task,
)


def audit_records(hive: Hive, agent: str) -> list[dict[str, object]]:
    path = hive.audit_path(agent)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_dropped_task_ends_in_done_with_its_result(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Write a haiku about folders.")

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "idle"
    done = hive.done_dir / "t1.md"
    assert done.is_file()
    text = done.read_text()
    assert "## Result" in text and "offline" in text
    summary = (hive.workspace_dir / "t1.md").read_text()
    assert "offline provider" in summary
    # What it was given: role (from the ROM, which goes to the system prompt), the task
    # text, the ids of the blocks in its context, token use.
    assert "- Role: worker of the test hive" in summary
    assert "Write a haiku about folders." in summary
    assert "- `task:t1`" in summary and " tokens" in summary
    assert not list(hive.tasks_dir.glob("*.md"))
    assert daemon.totals.tasks_done == 1


def test_task_acknowledgement_reaches_reply_to_mailbox(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", front="reply_to: human\n")

    run_until_idle(hive)

    subjects = [m.message.subject for m in Mailbox(hive, "human").unread()]
    assert any(s.startswith("[offline] Ack") for s in subjects)
    for item in Mailbox(hive, "human").unread():
        assert item.message.from_ == "worker"


def test_mail_to_an_agent_is_answered_once_and_moved_to_cur(hive: Hive) -> None:
    write_agent(hive, "worker")
    PostOffice(hive).send("human", "worker", "Question", "Are you there?")

    provider = CountingProvider()
    run_until_idle(hive, provider)

    replies = Mailbox(hive, "human").unread()
    assert [r.message.subject for r in replies] == ["[offline] Re: Question"]
    assert Mailbox(hive, "worker").unread() == []
    assert len(list((hive.mailbox_dir("worker") / "cur").iterdir())) == 1


def test_audit_record_of_a_cycle_is_complete(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")

    run_until_idle(hive)

    records = audit_records(hive, "worker")
    starts = [r for r in records if r["event"] == "cycle_start"]
    cycles = [r for r in records if r["event"] == "cycle"]
    assert len(starts) == len(cycles) >= 1
    first = cycles[0]
    for key in ("kept", "dropped", "usage", "tool_calls", "duration_ms", "tasks", "error"):
        assert key in first, key
    assert first["tasks"] == ["t1"]
    names = [c["name"] for c in first["tool_calls"]]  # type: ignore[index]
    assert names == ["send_message", "write_file", "complete_task"]
    assert any(k["id"] == "task:t1" for k in first["kept"])  # type: ignore[index]


def test_idle_hive_makes_no_model_call_over_many_heartbeats(hive: Hive) -> None:
    write_agent(hive, "worker", front="heartbeat: 0.02\n")
    provider = CountingProvider()
    daemon = Daemon(hive, fast_config(hive), provider, RunOptions())

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        await asyncio.sleep(1.0)  # about 50 heartbeats
        daemon.stop("test")
        await task

    asyncio.run(main())
    assert provider.requests == []


def test_heartbeat_after_work_costs_nothing(hive: Hive) -> None:
    write_agent(hive, "worker", front="heartbeat: 0.02\n")
    write_task(hive, "t1")
    provider = CountingProvider()
    daemon = Daemon(hive, fast_config(hive), provider, RunOptions())

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        for _ in range(200):
            await asyncio.sleep(0.05)
            # Done, and the cycle that did it has ended (its audit record is written).
            if daemon.totals.tasks_done and not any(r.busy for r in daemon.runners.values()):
                break
        calls_after_work = len(provider.requests)
        await asyncio.sleep(0.6)
        daemon.stop("test")
        await task
        assert len(provider.requests) == calls_after_work

    asyncio.run(main())
    assert (hive.done_dir / "t1.md").exists()


def test_a_watched_file_that_changes_makes_its_agent_think_once(hive: Hive) -> None:
    # No task and no mail: the change of a file in the ROM's `watch` is input enough.
    write_agent(hive, "worker", front="heartbeat: 0.02\nwatch: [workspace/*.md]\n")
    notes = hive.root / "workspace" / "notes.md"
    notes.parent.mkdir(exist_ok=True)
    provider = CountingProvider()
    daemon = Daemon(hive, fast_config(hive), provider, RunOptions())

    async def calls_settle() -> int:
        seen = -1
        for _ in range(40):  # until no call came for 0.25 s
            await asyncio.sleep(0.25)
            if len(provider.requests) == seen:
                break
            seen = len(provider.requests)
        return seen

    async def main() -> tuple[int, int, int]:
        task = asyncio.create_task(daemon.run())
        before = await calls_settle()
        notes.write_text("# Notes\n\nThe plan changed.\n")
        after_edit = await calls_settle()
        await asyncio.sleep(0.5)  # heartbeats, the file unchanged
        daemon.stop("test")
        await task
        return before, after_edit, len(provider.requests)

    before, after_edit, at_end = asyncio.run(main())
    assert before == 0
    assert after_edit == 1  # one cycle, one model call (it has no tool to call)
    assert at_end == 1
    assert "workspace/notes.md" in provider.requests[0].context_ids


def test_delegated_tasks_wait_for_their_dependencies(hive: Hive) -> None:
    write_agent(hive, "a")
    write_agent(hive, "b")
    write_task(hive, "second", front="depends_on: [first]\nassignee: b\n")
    write_task(hive, "first", front="assignee: a\n")

    run_until_idle(hive)

    first = (hive.done_dir / "first.md").stat().st_mtime_ns
    second = (hive.done_dir / "second.md").stat().st_mtime_ns
    assert first <= second


def test_unmet_dependency_stops_until_idle_as_stalled(hive: Hive) -> None:
    write_agent(hive, "a")
    write_task(hive, "orphan", front="depends_on: [never]\n")

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "stalled"
    assert (hive.tasks_dir / "orphan.md").exists()
    assert any(tid == "orphan" for tid, _ in daemon.waiting)


def test_second_daemon_refuses_with_the_first_ones_pid(hive: Hive) -> None:
    import os

    with HiveLock(hive), pytest.raises(HiveLockedError, match=f"pid {os.getpid()}"):
        HiveLock(hive).acquire()


def test_restart_resumes_active_tasks(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    # As if a killed daemon had claimed it: the file sits in active/worker/.
    target = hive.active_dir_for("worker")
    target.mkdir(parents=True, exist_ok=True)
    (hive.tasks_dir / "t1.md").rename(target / "t1.md")

    run_until_idle(hive)

    assert (hive.done_dir / "t1.md").is_file()


def test_interrupted_cycle_is_marked_in_the_audit_log(hive: Hive) -> None:
    write_agent(hive, "worker")
    hive.audit_dir.mkdir(parents=True, exist_ok=True)
    hive.audit_path("worker").write_text(
        json.dumps({"event": "cycle_start", "at": "2026-01-01T00:00:00+00:00", "cycle": 7,
                    "tasks": ["t9"], "mail": []}) + "\n"
    )
    write_task(hive, "t1")

    run_until_idle(hive)

    records = audit_records(hive, "worker")
    interrupted = [r for r in records if r["event"] == "interrupted"]
    assert [r["cycle"] for r in interrupted] == [7]
    assert any(r["event"] == "cycle" and r["cycle"] == 8 for r in records)


def test_status_json_is_written(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")

    run_until_idle(hive)

    status = json.loads(hive.status_file.read_text())
    assert status["running"] is False
    assert status["provider"] == "offline"
    assert status["totals"]["tasks_done"] == 1
    assert "worker" in status["agents"]


class SlowRefreshes(StatusWriter):
    """status.json's refreshes take a while (a busy disk); the final write does not."""

    SLOW = 1.5  # s: far longer than a stop with no cycle in flight

    def __init__(self, hive: Hive, snapshot: Callable[[], RunSnapshot]) -> None:
        super().__init__(hive, snapshot)
        self.refreshing = threading.Event()

    def _write(self, status: DaemonStatus, **final: Any) -> None:
        if status.running:
            self.refreshing.set()
            time.sleep(self.SLOW)
        super()._write(status, **final)


def test_a_refresh_still_being_written_at_the_stop_never_replaces_the_final_status(
    hive: Hive,
) -> None:
    """Cancelling the refresh loop did not stop its write, in a thread: it landed after
    the final one, and status.json said `running: true` of a daemon that had exited."""
    write_agent(hive, "worker")
    daemon = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())
    daemon.status = writer = SlowRefreshes(hive, daemon.snapshot)

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        await until(writer.refreshing.is_set, "a refresh is being written")
        daemon.stop("test")
        await task

    asyncio.run(main())  # (which waits for the refresh's thread)

    status = json.loads(hive.status_file.read_text())
    assert (status["running"], status["stopped_because"]) == (False, "test")
    assert not list(hive.state_dir.glob(".status.*.tmp"))


def test_agent_added_while_running_gets_work(hive: Hive) -> None:
    write_agent(hive, "first")
    daemon = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        await asyncio.sleep(0.3)
        write_agent(hive, "late")
        write_task(hive, "for-late", front="assignee: late\n")
        for _ in range(100):
            await asyncio.sleep(0.05)
            if (hive.done_dir / "for-late.md").exists():
                break
        daemon.stop("test")
        await task

    asyncio.run(main())
    assert (hive.done_dir / "for-late.md").exists()


def test_agent_removed_while_running_stops_and_its_tasks_wait_for_it(hive: Hive) -> None:
    """Its runner ends; a task naming it waits for it (see `Router`) until it is given to
    another agent."""
    write_agent(hive, "stays")
    write_agent(hive, "leaves")
    daemon = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        for _ in range(100):
            await asyncio.sleep(0.05)
            if {"stays", "leaves"} <= set(daemon.runners):
                break
        shutil.rmtree(hive.agent_dir("leaves"))
        for _ in range(100):
            await asyncio.sleep(0.05)
            if "leaves" not in daemon.runners:
                break
        write_task(hive, "for-leaves", front="assignee: leaves\n")
        for _ in range(100):
            await asyncio.sleep(0.05)
            if dict(daemon.waiting).get("for-leaves", "").startswith(
                    "assigned to leaves, which is no agent of this hive"):
                break
        assert not (hive.done_dir / "for-leaves.md").exists()
        reassign(hive, "for-leaves", "stays")
        for _ in range(100):
            await asyncio.sleep(0.05)
            if (hive.done_dir / "for-leaves.md").exists():
                break
        daemon.stop("test")
        await task

    asyncio.run(main())
    assert set(daemon.runners) == {"stays"}
    assert "agent: stays" in (hive.done_dir / "for-leaves.md").read_text()
    assert not hive.audit_path("leaves").exists()  # it never ran a cycle


class HeldByAGate(CountingProvider):
    """The offline provider, but `agent`'s calls wait for `gate` and then fail: it keeps
    the tasks it claimed, unfinished."""

    def __init__(self, agent: str) -> None:
        super().__init__()
        self.agent = agent
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent == self.agent:
            self.waiting.set()
            await self.gate.wait()
            raise ModelConnectionError("the model is away (test)")
        return await super().complete(request)


def test_an_agent_removed_mid_cycle_gives_its_tasks_to_the_others(hive: Hive) -> None:
    """Its folder goes while its cycle runs: that cycle ends, the daemon and the other
    agents carry on, and the tasks it held go back to tasks/ for them (they stayed in
    tasks/active/leaves/ for good, and a cycle starting just then stopped the daemon);
    one assigned to it by name waits there for it."""
    write_agent(hive, "stays")
    write_agent(hive, "leaves", front="skills: [refunds]\n")  # routed to it by skill
    for i in range(3):
        write_task(hive, f"t{i}", "Process the refunds.")
    write_task(hive, "mine", front="assignee: leaves\n")
    provider = HeldByAGate("leaves")
    daemon = Daemon(hive, fast_config(hive), provider, RunOptions())

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        await asyncio.wait_for(provider.waiting.wait(), 10)
        shutil.rmtree(hive.agent_dir("leaves"))
        await until(lambda: "leaves" not in daemon.runners, "its runner stops")
        provider.gate.set()
        await until(lambda: len(list(hive.done_dir.glob("*.md"))) == 3, "the others did them")
        daemon.stop("test")
        await task

    asyncio.run(main())
    assert daemon.exit_reason == "test"
    for i in range(3):
        assert "agent: stays" in (hive.done_dir / f"t{i}.md").read_text()
    assert not hive.active_dir_for("leaves").exists()
    assert (hive.tasks_dir / "mine.md").exists()
    assert dict(daemon.waiting)["mine"].startswith("assigned to leaves, which is no agent")


def test_an_agent_whose_rom_just_went_runs_no_cycle_and_raises_nothing(hive: Hive) -> None:
    """Woken in the moment between its folder's removal and the daemon hearing of it."""
    write_agent(hive, "leaves")
    write_task(hive, "t1", front="assignee: leaves\n")
    services = HiveServices.open(hive, CountingProvider(), fast_config(hive))
    agent = Agent("leaves", services)
    shutil.rmtree(hive.agent_dir("leaves"))

    try:
        report = asyncio.run(agent.cycle())
    finally:
        if services.ltm is not None:
            services.ltm.close()

    assert not report.ran and report.reason == "no valid ROM"
    assert agent.config_error is not None and "no agent named 'leaves'" in agent.config_error


def test_tasks_of_an_agent_gone_while_stopped_are_given_back_at_the_start(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(hive, "stays")
    held = hive.active_dir_for("gone")
    held.mkdir(parents=True)
    (held / "orphan.md").write_text("# Orphan\n\nDo it.\n")
    (held / "named.md").write_text("---\nassignee: gone\n---\n# Named\n\nDo it.\n")

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "stalled"  # named.md waits for its agent
    assert "agent: stays" in (hive.done_dir / "orphan.md").read_text()
    assert (hive.tasks_dir / "named.md").exists()
    assert not held.exists()
    assert "agent gone is gone (no agents/gone/ROM.md): its tasks are back in tasks/ " \
        "for the others: orphan, named" in caplog.text
    assert "tasks/named.md and any other task assigned to gone wait in tasks/" in caplog.text


def test_a_rom_broken_while_stopped_keeps_its_last_good_config_and_says_so(
    hive: Hive,
) -> None:
    """The last good config outlives a restart; its problem, and then its fix, are in
    the audit log (`hivemind log`), once each."""
    rom = write_agent(hive, "worker")
    write_task(hive, "t1")
    run_until_idle(hive)
    good = rom.read_text()
    rom.write_text(good.replace("---\n", "---\nmax_steps: 0\n", 1))
    write_task(hive, "t2")

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t2.md").is_file()
    problems = [r for r in audit_records(hive, "worker") if r["event"] == "config_error"]
    assert [r["error"] for r in problems] == [
        "agents/worker/ROM.md: line 2: max_steps must be ≥ 1 (got 0)"
    ]
    rom.write_text(good)
    write_task(hive, "t3")
    run_until_idle(hive)
    events = [r["event"] for r in audit_records(hive, "worker")]
    assert events.count("config_error") == 1 and events.count("config_fixed") == 1


def test_an_edit_of_hive_toml_while_running_is_reported(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    """The daemon reads hive.toml once: an edit meanwhile is not silently ignored."""
    write_agent(hive, "worker")
    daemon = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        await until(lambda: "worker" in daemon.runners, "it runs")
        hive.config_file.write_text("[agents]\naccepts_unassigned = false\n")
        await until(lambda: "hive.toml changed" in caplog.text, "the edit is reported")
        hive.config_file.write_text("[daemon\n")
        await until(lambda: "not valid" in caplog.text, "the broken one is reported")
        daemon.stop("test")
        await task

    asyncio.run(main())
    changed = [r.getMessage() for r in caplog.records if "hive.toml changed" in r.getMessage()]
    assert changed[0] == ("hive.toml changed: this daemon keeps the settings it started "
                          "with (restart it to use the new ones)")
    assert "the new one is not valid" in changed[1] and "invalid TOML" in changed[1]


@pytest.mark.parametrize("given", [True, False], ids=["read-by-the-cli", "read-by-the-daemon"])
def test_an_edit_of_hive_toml_before_the_watch_starts_is_reported(
    hive: Hive, caplog: pytest.LogCaptureFixture, given: bool
) -> None:
    """Made after the settings were read but before the watch began (the daemon waits
    for the lock, an earlier daemon's workers, its own workers' start), the edit was
    taken for what the daemon read: never told, and undoing it was told as a change.
    The CLI hands over the bytes it read the settings from (`given`)."""
    read = "[daemon]\ngrace_period = 5.0\n"
    hive.config_file.write_text(read)
    write_agent(hive, "worker")
    hive_toml, config = read_hive_toml(hive), fast_config(hive)
    edit = "[daemon]\ngrace_period = 7.0\n"
    if given:  # the edit comes while the CLI starts its provider
        hive.config_file.write_text(edit)
        daemon = Daemon(hive, config, CountingProvider(), RunOptions(), hive_toml=hive_toml)
    else:  # the edit comes while the daemon waits for its lock, say
        daemon = Daemon(hive, config, CountingProvider(), RunOptions())
        hive.config_file.write_text(edit)

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        try:
            await until(lambda: "hive.toml changed" in caplog.text, "the edit is told", 5.0)
            hive.config_file.write_text(read)
            await until(lambda: "is back" in caplog.text, "the undo is told", 5.0)
        finally:
            daemon.stop("test")
            await task

    asyncio.run(main())
    told = [r.getMessage() for r in caplog.records if "hive.toml" in r.getMessage()]
    assert told == [
        "hive.toml changed: this daemon keeps the settings it started with (restart it to "
        "use the new ones)",
        "hive.toml is back as this daemon read it",
    ]


class BuggyFor(CountingProvider):
    """The offline provider, except that `agent`'s calls hit a bug (not a model error)."""

    def __init__(self, agent: str) -> None:
        super().__init__()
        self.agent = agent

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent == self.agent:
            raise RuntimeError("a bug in the runtime (test)")
        return await super().complete(request)


def test_a_bug_in_one_agents_cycle_does_not_stop_the_others(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    """The whole daemon stopped with a traceback; now that cycle fails visibly (in the
    log with its traceback, in the audit log), is retried after a back-off, and the
    other agents carry on."""
    write_agent(hive, "buggy")
    write_agent(hive, "fine")
    write_task(hive, "for-buggy", front="assignee: buggy\n")
    write_task(hive, "for-fine", front="assignee: fine\n")

    daemon = run_until_idle(hive, BuggyFor("buggy"), backoff=0.05)

    assert (hive.done_dir / "for-fine.md").is_file()
    assert (hive.active_dir_for("buggy") / "for-buggy.md").is_file()  # kept, not lost
    assert daemon.runners["buggy"].agent.last_error == "RuntimeError: a bug in the runtime (test)"
    errors = [r for r in audit_records(hive, "buggy") if r["event"] == "error"]
    assert errors and errors[0]["error"] == "RuntimeError: a bug in the runtime (test)"
    assert "buggy: a cycle failed on a bug in hivemind" in caplog.text
    assert "Traceback" in caplog.text


class AlwaysAway(CountingProvider):
    """A model that never answers: every cycle fails (and is retried)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        raise ModelConnectionError("the model is away (test)")


def test_max_cycles_counts_failed_cycles_too(hive: Hive) -> None:
    """Failed cycles went on past --max-cycles (each may cost tokens: a reply cut at
    max_tokens is paid for)."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    provider = AlwaysAway()

    daemon = run_until_idle(hive, provider, max_cycles=1, backoff=0.01)

    assert daemon.exit_reason == "max-cycles"
    assert daemon.totals.cycles == 1 and len(provider.requests) == 1


def test_a_second_signal_cuts_the_grace_period_short(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    """Ctrl-C during a slow model call said nothing and waited the whole grace period
    (30 s by default); a second Ctrl-C changed nothing."""
    write_agent(hive, "slow")
    write_task(hive, "t1")
    provider = HeldByAGate("slow")  # its call never returns
    config = fast_config(hive)
    config.daemon.grace_period = 60.0
    daemon = Daemon(hive, config, provider, RunOptions())

    async def main() -> float:
        task = asyncio.create_task(daemon.run())
        await asyncio.wait_for(provider.waiting.wait(), 10)
        daemon.stop("signal")
        await until(lambda: "Ctrl-C again stops at once" in caplog.text, "it says so")
        started = asyncio.get_running_loop().time()
        daemon.stop("signal")
        await asyncio.wait_for(task, 10)
        return asyncio.get_running_loop().time() - started

    assert asyncio.run(main()) < 5
    assert "stopping: 1 cycle(s) in flight may take up to 60 s to finish" in caplog.text
    assert (hive.active_dir_for("slow") / "t1.md").is_file()  # kept for the next run
    run_until_idle(hive)  # and the next run marks the cut cycle, then does the task
    assert (hive.done_dir / "t1.md").is_file()
    assert "interrupted" in [r["event"] for r in audit_records(hive, "slow")]


def test_status_command_shows_the_run_tokens_and_errors(hive: Hive) -> None:
    from typer.testing import CliRunner

    from hivemind.cli.app import app

    write_agent(hive, "worker")
    write_task(hive, "t1")
    run_until_idle(hive)

    result = CliRunner().invoke(app, ["status", str(hive.root)])
    assert result.exit_code == 0, result.output
    assert "daemon stopped (idle), provider offline" in result.output
    assert "1 done" in result.output and "tokens" in result.output


def test_status_of_a_killed_daemon_says_it_is_gone(hive: Hive) -> None:
    from typer.testing import CliRunner

    from hivemind.cli.app import app

    write_agent(hive, "worker")
    hive.status_file.write_text(json.dumps({"pid": 999_999_999, "running": True,
                                            "provider": "offline", "agents": {}}))
    result = CliRunner().invoke(app, ["status", str(hive.root)])
    assert result.exit_code == 0, result.output
    assert "not running" in result.output and "killed" in result.output


def test_the_team_is_in_the_system_prompt_and_not_in_the_status_block(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    write_task(hive, "t1", front="assignee: ann\n")
    provider = CountingProvider()
    run_until_idle(hive, provider)

    request = provider.requests[0]
    assert "Your team: bob (bob of the test hive)" in request.system
    [team] = [line for line in request.system.splitlines() if line.startswith("Your team")]
    assert "ann (" not in team  # not herself (her own role is in the first line)
    [status] = [e for e in json.loads(request.context_json) if e["metadata"]["type"] == "status"]
    assert "agents" not in status["content"] and "tasks" in status["content"]


def test_a_done_task_moved_back_is_done_again_with_its_new_result(hive: Hive) -> None:
    """`mv tasks/done/x.md tasks/` to have it redone: it was redone, but the new result
    was dropped (the file kept its first result and finished_at, the person's note
    unanswered)."""
    write_agent(hive, "worker")
    write_task(hive, "t1", "Write a haiku about folders.")
    run_until_idle(hive)
    first = (hive.done_dir / "t1.md").read_text()
    redo = hive.tasks_dir / "t1.md"
    (hive.done_dir / "t1.md").rename(redo)
    redo.write_text(redo.read_text() + "\nREDO: make it about files instead.\n")

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "idle"
    again = (hive.done_dir / "t1.md").read_text()
    assert again.count("## Result") == 2
    assert again.index("REDO: make it about files") < again.rindex("## Result")
    finished = [line for line in again.splitlines() if line.startswith("finished_at:")]
    assert finished and finished != [x for x in first.splitlines() if x.startswith("finished_at:")]


def test_a_status_json_that_cannot_be_written_stops_nothing(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk killed an idle daemon within seconds: the status.json refresh raised.
    (Here a folder stands where the file goes: the write fails the same way.)"""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    blocked = hive.status_file
    blocked.mkdir(parents=True)
    (blocked / "keep").write_text("a folder where status.json goes")

    daemon = run_until_idle(hive)

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "t1.md").is_file()
    said = [r.message for r in caplog.records if "cannot write it" in r.message]
    assert len(said) == 1 and said[0].startswith(".hivemind/status.json: cannot write it")
    assert not list(blocked.parent.glob(".status.*.tmp"))


@pytest.mark.parametrize("removed", ["lock-file", "hivemind-folder"])
def test_a_removed_lock_file_lets_no_second_daemon_run(hive: Hive, removed: str) -> None:
    """`rm .hivemind/daemon.lock` (or `rm -rf .hivemind`, `git clean -fdX`) while a
    daemon ran let a second one start beside it: tasks were done twice."""
    write_agent(hive, "worker")
    first = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())
    second = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())

    async def main() -> None:
        task = asyncio.create_task(first.run())
        await until(hive.lock_file.exists, "the first daemon holds the hive")
        await until(lambda: "worker" in first.runners, "it runs")
        if removed == "lock-file":
            hive.lock_file.unlink()
        else:  # as `rm -rf` does while the daemon writes there: again until it is gone
            for _ in range(100):
                try:
                    shutil.rmtree(hive.root / ".hivemind")
                    break
                except OSError:  # a file made in a folder between its listing and rmdir
                    await asyncio.sleep(0.01)
        with pytest.raises(HiveLockedError):
            await second.run()
        await until(hive.lock_file.exists, "the lock file is written again")
        first.stop("test")
        await task

    asyncio.run(main())
    assert not second.runners


def test_a_hive_whose_folder_cannot_be_locked_runs_on_its_lock_file_alone(
    hive: Hive, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On NFS a folder cannot be flock'ed (locks become POSIX locks, which need a
    descriptor open for writing): `hivemind run` ended on a traceback (EBADF)."""
    real_flock = fcntl.flock

    def nfs_flock(fd: int, how: int) -> None:
        if how & fcntl.LOCK_EX and stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        real_flock(fd, how)

    monkeypatch.setattr(fcntl, "flock", nfs_flock)
    write_agent(hive, "worker")
    write_task(hive, "t1")
    first = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())
    second = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())

    async def main() -> None:
        task = asyncio.create_task(first.run())
        await until((hive.done_dir / "t1.md").exists, "the first daemon works")
        with pytest.raises(HiveLockedError):  # the lock file keeps it out
            await second.run()
        first.stop("test")
        await task

    asyncio.run(main())
    told = [r.getMessage() for r in caplog.records if "cannot be locked" in r.getMessage()]
    assert told == [
        f"{hive.root}: its folder cannot be locked here (Bad file descriptor): only "
        ".hivemind/daemon.lock keeps a second daemon out, so leave .hivemind/ in place "
        "while this one runs"
    ]
    assert not second.runners


def test_a_hive_where_no_file_can_be_locked_says_so_in_one_line(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NFS with no lock manager (ENOLCK): no daemon starts, and the reason is one line."""
    def no_locks(fd: int, how: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    write_agent(hive, "worker")
    daemon = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())

    with pytest.raises(LockUnavailableError) as caught:
        asyncio.run(daemon.run())

    assert str(caught.value).startswith(f"{hive.lock_file}: cannot be locked (No locks available)")
    assert not daemon.runners


def test_a_cycle_cut_by_the_stop_after_its_record_counts_in_the_summary(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary's cycles are the audit log's: a cycle whose record is written and
    whose flush (a slow disk) outlasts the grace period still counts."""
    flushing = asyncio.Event()

    async def slow_flush(self: Agent, *args: Any) -> bool:
        flushing.set()
        await asyncio.sleep(30)  # the disk never comes back within the grace period
        return False

    monkeypatch.setattr(Agent, "_record_flushed", slow_flush)
    write_agent(hive, "worker")
    write_task(hive, "t1")
    config = fast_config(hive)
    config.daemon.grace_period = 0.5
    daemon = Daemon(hive, config, CountingProvider(), RunOptions())

    async def main() -> None:
        task = asyncio.create_task(daemon.run())
        await asyncio.wait_for(flushing.wait(), 10)
        daemon.stop("test")
        await asyncio.wait_for(task, 10)

    asyncio.run(main())
    recorded = [json.loads(line) for line in hive.audit_path("worker").read_text().splitlines()]
    assert len([r for r in recorded if r["event"] == "cycle"]) == 1
    assert daemon.totals.cycles == 1
