"""Which knowledge notes reach the model: all of a small knowledge base; of a large one
only the notes that share a word with the agent's work, within a quarter of its budget,
the same notes while that work is the same."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hivemind.agent.cycle import Agent
from hivemind.agent.services import HiveServices
from hivemind.agent.shelf import LEFT_OUT_ID
from hivemind.hive.layout import HUMAN, Hive
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import fast_config, write_agent, write_task
from tests.scripted_model import context_entries, is_first_round, provider

ROM = "max_context_tokens: 20000\nmax_output_tokens: 2000\n"


class Model:
    """The fake Messages API, answering "noted"; the first request of each cycle kept."""

    def __init__(self, api: Model) -> None:
        self.api = api
        self.firsts: list[Any] = []
        api.responder = self._answer

    def _answer(self, body: Any) -> Reply:
        if is_first_round(body):
            self.firsts.append(body)
        return Reply(body=message_body([{"type": "text", "text": "noted"}]))


@pytest.fixture
def api() -> Iterator[Model]:
    with FakeAnthropic() as fake:
        yield Model(fake)


def agent_with_task(hive: Hive, api: Model, text: str) -> Agent:
    """The agent `worker`, holding task t1 (`text`)."""
    services = HiveServices.open(hive, provider(api.api), fast_config(hive))
    write_task(hive, "t1", text)
    board = services.board
    assert board.claim(next(iter(board.scan_pending())), "worker") is not None
    return Agent("worker", services)


def big_knowledge_base(hive: Hive, n: int = 300) -> None:
    """`n` notes of ~150 tokens on unrelated topics, and one on tomatoes."""
    for i in range(n - 1):
        (hive.knowledge_dir / f"note{i:03d}.md").write_text(
            f"# Procedure {i} for unit{i}\n\n" + "Some steps to follow. " * 30
        )
    (hive.knowledge_dir / "garden").mkdir()
    (hive.knowledge_dir / "garden/tomato.md").write_text(
        "# Growing tomatoes\n\nPlant them after the last frost.\n"
    )


def over_big_base(hive: Hive, api: Model, text: str, front: str = ROM) -> Agent:
    """`worker` (ROM `front`) over `big_knowledge_base`, holding task t1 (`text`)."""
    write_agent(hive, "worker", front=front)
    big_knowledge_base(hive)
    return agent_with_task(hive, api, text)


def knowledge_ids(body: Any) -> list[str]:
    return [e["id"] for e in context_entries(body) if e["metadata"]["type"] == "knowledge"]


async def one_cycle(agent: Agent, api: Model) -> Any:
    before = len(api.firsts)
    await agent.cycle()
    assert len(api.firsts) == before + 1, "no model call"
    return api.firsts[-1]


async def test_a_small_knowledge_base_is_in_view_whole(hive: Hive, api: Model) -> None:
    write_agent(hive, "worker", front=ROM)
    for name in ("style", "deploy", "team"):
        (hive.knowledge_dir / f"{name}.md").write_text(f"# {name}\n\nShort note.\n")
    agent = agent_with_task(hive, api, "When should I plant tomatoes?")

    body = await one_cycle(agent, api)

    assert knowledge_ids(body) == ["knowledge/deploy.md", "knowledge/style.md",
                                   "knowledge/team.md"]
    assert LEFT_OUT_ID not in [e["id"] for e in context_entries(body)]


async def test_of_a_large_knowledge_base_only_notes_sharing_a_word_with_the_task_come(
    hive: Hive, api: Model
) -> None:
    agent = over_big_base(hive, api, "When should I plant tomatoes?")

    body = await one_cycle(agent, api)

    assert knowledge_ids(body) == ["knowledge/garden/tomato.md"]
    [line] = [e for e in context_entries(body) if e["id"] == LEFT_OUT_ID]
    assert line["content"].startswith("299 of the 300 notes under knowledge/ are not shown")
    assert "search_files" in line["content"]


async def test_notes_matching_the_task_fill_at_most_a_quarter_of_the_budget(
    hive: Hive, api: Model
) -> None:
    # Every note shares words with this task.
    agent = over_big_base(hive, api, "Follow the procedure steps for this unit.")

    body = await one_cycle(agent, api)

    notes = [e for e in context_entries(body) if e["metadata"]["type"] == "knowledge"]
    budget = agent.context.budget_for(agent.config())  # type: ignore[arg-type]
    assert 1 < len(notes) < 300
    assert sum(agent.s.counter.count_json(e["content"]) for e in notes) <= budget // 4


async def test_the_notes_in_view_stay_the_same_while_the_work_is_the_same(
    hive: Hive, api: Model
) -> None:
    agent = over_big_base(hive, api, "When should I plant tomatoes?")
    first = await one_cycle(agent, api)
    # A mail whose subject names other notes: they are not swapped in (the notes are the
    # cached prefix; the mail is answered from the tasks' notes and search_files).
    agent.s.post.send(HUMAN, "worker", "unit7 procedure", "Are you coming?")

    second = await one_cycle(agent, api)

    assert knowledge_ids(second) == knowledge_ids(first) == ["knowledge/garden/tomato.md"]


async def test_holding_no_task_the_notes_follow_the_unread_mail(
    hive: Hive, api: Model
) -> None:
    write_agent(hive, "worker", front=ROM)
    big_knowledge_base(hive)
    services = HiveServices.open(hive, provider(api.api), fast_config(hive))
    agent = Agent("worker", services)
    services.post.send(HUMAN, "worker", "tomatoes", "When do I plant them?")

    body = await one_cycle(agent, api)

    assert knowledge_ids(body) == ["knowledge/garden/tomato.md"]


async def test_the_line_on_notes_left_out_names_only_tools_the_agent_has(
    hive: Hive, api: Model
) -> None:
    agent = over_big_base(hive, api, "When should I plant tomatoes?",
                          ROM + "tools: [send_message, read_file, complete_task]\n")

    body = await one_cycle(agent, api)

    [line] = [e for e in context_entries(body) if e["id"] == LEFT_OUT_ID]
    assert "search_files" not in line["content"] and "list_files" not in line["content"]
    assert line["content"].endswith("read_file shows one whose path you know.")
