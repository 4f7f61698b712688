"""The daemon's book of cycles and who takes work, without a running daemon: what a
cycle's end asks for (a dispatch, a stop at --max-cycles, a pause), and what does not
count as a cycle."""

from __future__ import annotations

import asyncio

import pytest

from hivemind.agent.cycle import Agent
from hivemind.agent.pause import DAY_SPENT
from hivemind.agent.report import CycleReport
from hivemind.agent.services import HiveServices
from hivemind.daemon.availability import Availability
from hivemind.daemon.cyclebook import CycleBook
from hivemind.daemon.runner import AgentRunner, RunOptions
from hivemind.hive.layout import Hive
from hivemind.llm.offline import OfflineProvider
from tests.helpers import write_agent


class Calls:
    """What the book asked of the daemon."""

    def __init__(self) -> None:
        self.stops: list[str] = []
        self.dispatches = 0

    def stop(self, reason: str) -> None:
        self.stops.append(reason)

    def dispatch(self) -> None:
        self.dispatches += 1


@pytest.fixture
def services(hive: Hive) -> HiveServices:
    write_agent(hive, "ann")
    return HiveServices.open(hive, OfflineProvider())


@pytest.fixture
def runner(services: HiveServices) -> AgentRunner:
    return AgentRunner(agent=Agent("ann", services))


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def book(services: HiveServices, runner: AgentRunner, calls: Calls) -> CycleBook:
    """The book of a run of the one agent `ann`, with --max-cycles 2."""
    return CycleBook(RunOptions(max_cycles=2), services, Availability({"ann": runner}),
                     stop=calls.stop, request_dispatch=calls.dispatch)


async def test_a_cycle_that_ran_is_counted_and_asks_for_a_dispatch(
    book: CycleBook, runner: AgentRunner, calls: Calls,
) -> None:
    assert await book.take(runner, asyncio.Event())

    book.after(runner, CycleReport(agent="ann", ran=True, tasks_done=2))

    assert (book.totals.cycles, book.totals.tasks_done) == (1, 2)
    assert calls.dispatches == 1 and calls.stops == []


async def test_the_last_cycle_of_max_cycles_stops_the_run(
    book: CycleBook, runner: AgentRunner, calls: Calls,
) -> None:
    for _ in range(2):
        assert await book.take(runner, asyncio.Event())
        book.after(runner, CycleReport(agent="ann", ran=True))

    assert calls.stops == ["max-cycles"]


async def test_a_cycle_that_found_nothing_frees_its_place_under_max_cycles(
    book: CycleBook, runner: AgentRunner,
) -> None:
    for _ in range(2):
        assert await book.take(runner, asyncio.Event())
    waiting = asyncio.ensure_future(book.take(runner, asyncio.Event()))
    await asyncio.sleep(0)
    assert not waiting.done()  # both cycles allowed are taken

    book.after(runner, CycleReport(agent="ann", ran=False))

    assert await asyncio.wait_for(waiting, 1) is True
    assert book.totals.cycles == 0


async def test_a_spent_daily_budget_takes_the_agent_out_of_routing(
    book: CycleBook, runner: AgentRunner, calls: Calls,
) -> None:
    assert "ann" in book.availability.configs()

    book.after(runner, CycleReport(agent="ann", reason=DAY_SPENT))

    assert "ann" not in book.availability.configs()
    assert book.availability.away() == {"ann": "is paused: its daily token budget is spent"}
    assert calls.dispatches == 1  # the waiting list then says why its tasks wait
