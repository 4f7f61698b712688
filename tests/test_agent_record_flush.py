"""The cycle's audit record reaches the disk before the cycle's mail moves to cur/;
a cycle with no mail to mark does not wait for it (`Agent.settle` does)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from hivemind.agent.cycle import Agent
from hivemind.agent.record import OtherRecord
from hivemind.agent.services import HiveServices
from hivemind.fs import flush
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.llm.offline import OfflineProvider
from tests.helpers import fast_config, write_agent, write_task

AGENT = "worker"


@dataclass
class Flush:
    """One flush of the audit file, as seen from the flushing thread."""

    records: int  # complete `cycle` records in the file when it was flushed
    unread: int  # messages still in the agent's new/ at that moment


class FlushLog:
    """Wraps `flush.flush_many` (the flusher's worker side) and notes each flush of
    the agent's audit file: the real flush still runs."""

    def __init__(self, hive: Hive) -> None:
        self.audit = hive.audit_path(AGENT)
        self.new_dir = hive.mailbox_dir(AGENT) / "new"
        self.flushes: list[Flush] = []
        self._inner = flush.flush_many

    def __call__(self, requests: Sequence[Sequence[Path]]) -> list[OSError | None]:
        if any(Path(p) == self.audit for paths in requests for p in paths):
            text = self.audit.read_text(encoding="utf-8")
            unread = len(list(self.new_dir.glob("*.md"))) if self.new_dir.is_dir() else 0
            self.flushes.append(Flush(text.count('"event": "cycle",'), unread))
        return self._inner(requests)


@pytest.fixture
def flush_log(hive: Hive, monkeypatch: pytest.MonkeyPatch) -> FlushLog:
    log = FlushLog(hive)
    monkeypatch.setattr(flush, "flush_many", log)
    return log


def open_agent(hive: Hive) -> Agent:
    write_agent(hive, AGENT)
    return Agent(AGENT, HiveServices.open(hive, OfflineProvider(), fast_config(hive)))


def claim_one(agent: Agent, stem: str) -> None:
    write_task(agent.s.hive, stem)
    board = agent.s.board
    (ref,) = [r for r in board.scan_pending() if r.id == stem]
    assert board.claim(ref, AGENT) is not None


async def test_mail_moves_to_cur_only_after_the_record_is_on_disk(
    hive: Hive, flush_log: FlushLog
) -> None:
    agent = open_agent(hive)
    PostOffice(hive).send("human", AGENT, "hello", "Are you there?")
    report = await agent.cycle()
    assert report.ran and report.error is None
    # The record was flushed while the message still waited in new/ ...
    assert any(f.records == 1 and f.unread == 1 for f in flush_log.flushes), flush_log.flushes
    # ... and the message moved only then.
    assert agent.mailbox.unread() == []
    assert len(list((hive.mailbox_dir(AGENT) / "cur").glob("*.md"))) == 1


async def test_without_mail_the_record_flush_is_left_to_settle(
    hive: Hive, flush_log: FlushLog
) -> None:
    agent = open_agent(hive)
    claim_one(agent, "write-it")
    report = await agent.cycle()
    assert report.ran and report.tasks_done == 1
    # The record is written (a kill loses nothing written) ...
    assert '"event": "cycle",' in agent.audit.path.read_text(encoding="utf-8")
    await agent.settle()
    # ... and on disk once `settle` returns.
    assert any(f.records == 1 for f in flush_log.flushes), flush_log.flushes


async def test_settle_without_a_cycle_returns_at_once(hive: Hive) -> None:
    agent = open_agent(hive)
    await asyncio.wait_for(agent.settle(), 1.0)


async def test_a_failed_background_flush_is_logged_not_raised(
    hive: Hive, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    agent = open_agent(hive)
    claim_one(agent, "write-it")
    audit = hive.audit_path(AGENT)
    inner = flush.flush_many

    def failing(requests: Sequence[Sequence[Path]]) -> list[OSError | None]:
        errors = inner(requests)
        return [OSError(5, "Input/output error") if any(Path(p) == audit for p in paths)
                else e for paths, e in zip(requests, errors, strict=True)]

    report = await agent.cycle()  # its own flushes succeed
    assert report.error is None
    monkeypatch.setattr(flush, "flush_many", failing)
    agent.audit.write(OtherRecord(event="note", cycle=agent.cycle_no))
    agent.flushes.in_background()
    await agent.settle()
    assert "audit flush failed" in caplog.text
    assert str(audit) in caplog.text


# -- one trip to the disk a cycle -------------------------------------------------


@dataclass
class Trip:
    """One trip of the flusher's worker: what it flushed, and what showed then."""

    paths: list[Path]
    starts: int  # `cycle_start` lines in the audit file when it was flushed
    done: list[str]  # files in tasks/done/ at that moment


@pytest.fixture
def trips(hive: Hive, monkeypatch: pytest.MonkeyPatch) -> list[Trip]:
    seen: list[Trip] = []
    inner = flush.flush_many
    audit = hive.audit_path(AGENT)

    def log(requests: Sequence[Sequence[Path]]) -> list[OSError | None]:
        text = audit.read_text(encoding="utf-8") if audit.exists() else ""
        seen.append(Trip(
            paths=[Path(p) for paths in requests for p in paths],
            starts=text.count('"event": "cycle_start"'),
            done=sorted(p.name for p in hive.done_dir.glob("*.md")),
        ))
        return inner(requests)

    monkeypatch.setattr(flush, "flush_many", log)
    return seen


async def test_the_start_line_rides_with_the_tools_flush_before_any_effect_shows(
    hive: Hive, trips: list[Trip]
) -> None:
    agent = open_agent(hive)
    claim_one(agent, "write-it")
    report = await agent.cycle()
    assert report.ran and report.tasks_done == 1
    audit = hive.audit_path(AGENT)
    first = trips[0]
    # One trip carries the start line and the tools' files together ...
    assert audit in first.paths and len(first.paths) > 1, trips
    assert first.starts == 1
    # ... and nothing the tools made was visible before it.
    assert first.done == []
    assert (hive.done_dir / "write-it.md").is_file()
    # The cycle's record goes later (with the next flush, or on its own).
    assert len(trips) == 1
    await agent.settle()
    assert len(trips) == 2 and trips[1].paths == [audit]


async def test_a_record_left_alone_is_flushed_after_a_short_delay(
    hive: Hive, trips: list[Trip]
) -> None:
    agent = open_agent(hive)
    claim_one(agent, "write-it")
    await agent.cycle()
    assert len(trips) == 1
    # Nobody flushes anything else and nobody calls settle: the record still goes.
    for _ in range(200):
        if len(trips) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(trips) == 2, trips
    assert trips[1].paths == [hive.audit_path(AGENT)]


async def test_a_cycle_whose_tools_flush_nothing_flushes_its_start_line_itself(
    hive: Hive, trips: list[Trip]
) -> None:
    write_agent(hive, AGENT, front="watch: [workspace/*.md]\n")
    (hive.root / "workspace").mkdir(exist_ok=True)
    (hive.root / "workspace" / "notes.md").write_text("# Notes\n")
    agent = Agent(AGENT, HiveServices.open(hive, OfflineProvider(), fast_config(hive)))
    report = await asyncio.wait_for(agent.cycle(), 5.0)  # it must not wait forever
    assert report.ran and report.tool_calls == 0, report
    assert trips and trips[0].paths == [hive.audit_path(AGENT)] and trips[0].starts == 1


async def test_settle_ends_even_when_a_flush_it_waits_for_never_comes(
    hive: Hive, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop must end whatever happens to a flush: the log is flushed directly
    instead."""
    from hivemind.agent import flushes as flushes_module

    write_agent(hive, "worker")
    services = HiveServices.open(hive, OfflineProvider(), fast_config(hive))
    agent = Agent("worker", services)
    agent.audit.append(OtherRecord(event="note", cycle=0))
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    agent.flushes.pending.add(never)
    monkeypatch.setattr(flushes_module, "SETTLE_SECONDS", 0.1)

    await asyncio.wait_for(agent.settle(), 5)

    assert never.cancelled()
    assert "its flush did not come in 0.1 s; flushed here instead" in caplog.text
    if services.ltm is not None:
        services.ltm.close()
