"""Reflection with the offline provider: recurring topics, the same every time, labelled."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from hivemind.ltm.inmemory import InMemoryBackend
from hivemind.ltm.offline_reflection import LABEL, OfflineReflector
from hivemind.ltm.records import MemoryKind
from hivemind.ltm.store import LongTermMemory
from hivemind.settings import MemorySettings
from tests.helpers import CountingProvider, fast_config, write_agent, write_task

T0 = datetime(2024, 5, 1, tzinfo=UTC)
NOTES = [
    ("The deploy failed because the staging certificate expired.", 0.9),
    ("We rolled the deploy back at noon.", 0.5),
    ("The next deploy waits for the certificate renewal.", 0.6),
    ("Lunch was pasta.", 0.1),
]


def fill(ltm: LongTermMemory, agent: str = "worker") -> None:
    for n, (text, importance) in enumerate(NOTES):
        ltm.remember(text, agent=agent, scope="global", importance=importance,
                     at=T0 + timedelta(minutes=n))


async def test_the_offline_reflector_writes_the_same_insights_every_time() -> None:
    written = []
    for _ in range(2):
        with LongTermMemory(InMemoryBackend(), MemorySettings(reflection_threshold=5)) as ltm:
            fill(ltm)
            made = await ltm.maybe_reflect("worker", OfflineReflector(), at=T0 + timedelta(hours=1))
            contents = {r.id: r.content for r in ltm.backend.list_all()}
            written.append([(r.content, r.kind, sorted(contents[i] for i in r.source_ids))
                            for r in made])
    assert written[0] == written[1]
    texts = [content for content, _, _ in written[0]]
    assert texts[0].startswith(f"{LABEL} 3 memories are about 'deploy'")
    assert "staging certificate expired" in texts[0]  # the most important of the three
    assert any("'certificate'" in t for t in texts)
    assert not any("pasta" in t for t in texts)  # said once: no topic
    assert all(kind is MemoryKind.SEMANTIC and sources for _, kind, sources in written[0])


async def test_memories_that_share_no_topic_give_no_insight() -> None:
    with LongTermMemory(InMemoryBackend(), MemorySettings(reflection_threshold=1)) as ltm:
        ltm.remember("Lunch was pasta.", agent="worker", scope="global", importance=0.9)
        ltm.remember("The printer jammed.", agent="worker", scope="global", importance=0.9)
        assert await ltm.maybe_reflect("worker", OfflineReflector()) == []


def offline_run(hive: Hive, reflect_offline: bool) -> list[str]:
    """An offline daemon run of an agent with memories enough to reflect; the insights."""
    write_agent(hive, "worker")
    write_task(hive, "t1", "Check why the deploy failed.")
    with LongTermMemory(hive) as ltm:
        fill(ltm)
    config = fast_config(hive)
    config.memory.reflection_threshold = 5.0
    config.memory.reflect_offline = reflect_offline
    provider = CountingProvider()
    daemon = Daemon(hive, config, provider, RunOptions(until_idle=True, idle_settle=0.2))
    asyncio.run(asyncio.wait_for(daemon.run(), 30))
    assert provider.requests  # the cycle ran
    with LongTermMemory(hive) as ltm:
        return [r.content for r in ltm.backend.query({"kind": MemoryKind.SEMANTIC})]


def test_an_offline_run_reflects_and_audits_it(hive: Hive) -> None:
    # Reflection never ran with the offline provider: now its agents reflect by rule.
    insights = offline_run(hive, reflect_offline=True)
    assert insights and all(text.startswith(LABEL) for text in insights)
    records = [json.loads(x) for x in hive.audit_path("worker").read_text().splitlines()]
    assert any(r["event"] == "reflection" and r.get("written") for r in records)


def test_reflect_offline_false_keeps_offline_agents_from_reflecting(hive: Hive) -> None:
    assert offline_run(hive, reflect_offline=False) == []
