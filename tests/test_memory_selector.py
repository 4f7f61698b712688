"""MemorySelector: CRITICAL always, then HIGH/MEDIUM/LOW under 80/90/95 % of the budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivemind.errors import CriticalOverBudgetError
from hivemind.memory.blocks import (
    AnyBlock,
    BlockType,
    FileBlock,
    HistoryBlock,
    Priority,
    RomBlock,
    StatusBlock,
)
from hivemind.memory.builder import ContextBuilder
from hivemind.memory.loader import ContentLoader
from hivemind.memory.manager import WorkingMemoryManager
from hivemind.memory.relevance import RelevanceScorer
from hivemind.memory.selector import MemorySelector
from hivemind.memory.tokens import TokenCounter

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
BUDGET = 10_000


def make_selector(root: Path, stat_ttl: float = 0.0) -> MemorySelector:
    counter = TokenCounter()
    scorer = RelevanceScorer(now=lambda: NOW)
    return MemorySelector(ContentLoader(root, counter), counter, scorer, stat_ttl=stat_ttl)


def rom_of_size(selector: MemorySelector, root: Path, tokens: int) -> RomBlock:
    """A CRITICAL ROM block whose estimate is exactly `tokens` (file sized to match)."""
    rom = RomBlock(agent="lead", location="ROM.md", timestamp=NOW)
    (root / "ROM.md").write_text("")
    envelope = selector.estimate(rom) - selector.counter.estimate_bytes(0)
    (root / "ROM.md").write_text("r" * 3 * (tokens - envelope - 4))
    assert selector.estimate(rom) == tokens
    return rom


@pytest.mark.parametrize(
    ("priority", "percent"),
    [
        pytest.param(Priority.HIGH, 80, id="high-80"),
        pytest.param(Priority.MEDIUM, 90, id="medium-90"),
        pytest.param(Priority.LOW, 95, id="low-95"),
    ],
)
@pytest.mark.parametrize(
    ("offset", "kept"),
    [
        pytest.param(-1, True, id="one-token-under"),
        pytest.param(0, False, id="exactly-at"),
        pytest.param(1, False, id="one-token-over"),
    ],
)
def test_each_tier_fills_only_while_strictly_under_its_share(
    tmp_path: Path, priority: Priority, percent: int, offset: int, kept: bool
) -> None:
    selector = make_selector(tmp_path)
    block = StatusBlock(status_type="mail", value={"new": 3}, priority=priority, timestamp=NOW)
    size = selector.estimate(block)
    rom = rom_of_size(selector, tmp_path, BUDGET * percent // 100 - size + offset)

    selection = selector.select([rom, block], BUDGET)

    assert (block in selection.kept) is kept
    if not kept:
        (dropped,) = selection.dropped
        assert dropped.block is block
        assert dropped.tokens == size
        assert dropped.reason.startswith(
            f"over budget at {priority.name}: {size} tokens would pass {percent} % of {BUDGET}"
        )


def test_critical_blocks_are_kept_even_when_they_fill_the_budget(tmp_path: Path) -> None:
    selector = make_selector(tmp_path)
    rom = rom_of_size(selector, tmp_path, BUDGET)
    small = HistoryBlock(action="read_file", priority=Priority.HIGH, timestamp=NOW)
    selection = selector.select([small, rom], BUDGET)
    assert selection.kept == [rom]
    assert selection.used == BUDGET


def test_critical_over_budget_names_the_blocks_and_their_sizes(tmp_path: Path) -> None:
    selector = make_selector(tmp_path)
    rom = rom_of_size(selector, tmp_path, 700)
    (tmp_path / "rules.md").write_text("x" * 1500)
    rules = FileBlock(location="rules.md", priority=Priority.CRITICAL, timestamp=NOW)
    selector.select([rom], 1000)  # estimates count blocks as compressed for this budget
    rules_size = selector.estimate(rules)
    assert rules_size < 558  # a quarter of the budget, plus the envelope: compressed
    with pytest.raises(CriticalOverBudgetError) as caught:
        selector.select([rom, rules], 1000)
    message = str(caught.value)
    assert "rom:lead (700 tokens)" in message
    assert f"rules.md ({rules_size} tokens)" in message
    assert "budget is 1000" in message
    assert caught.value.sizes == {"rom:lead": 700, "rules.md": rules_size}


def test_expired_blocks_are_dropped_as_expired(tmp_path: Path) -> None:
    selector = make_selector(tmp_path)
    gone = StatusBlock(status_type="old", timestamp=NOW, expiry=NOW - timedelta(seconds=1))
    live = StatusBlock(status_type="new", timestamp=NOW, expiry=NOW + timedelta(hours=1))
    selection = selector.select([gone, live], BUDGET)
    assert selection.kept == [live]
    assert [(d.block, d.reason, d.tokens) for d in selection.dropped] == [(gone, "expired", 0)]


def test_within_a_tier_the_more_relevant_block_wins(tmp_path: Path) -> None:
    selector = make_selector(tmp_path)
    sure = HistoryBlock(id="sure", action="a", confidence=0.9, priority=Priority.HIGH,
                        timestamp=NOW)
    unsure = HistoryBlock(id="unsure", action="a", confidence=0.3, priority=Priority.HIGH,
                          timestamp=NOW)
    rom = rom_of_size(selector, tmp_path, 8000 - selector.estimate(sure) - 1)
    selection = selector.select([rom, unsure, sure], BUDGET)
    assert [b.id for b in selection.kept] == ["rom:lead", "sure"]
    assert selection.scores["sure"] > selection.scores["unsure"]


def test_equal_scores_go_to_the_newest(tmp_path: Path) -> None:
    selector = make_selector(tmp_path)
    selector.scorer.set_task("deploy the release")
    older = HistoryBlock(id="older", action="deploy release", priority=Priority.HIGH,
                         timestamp=NOW - timedelta(seconds=5))
    newer = HistoryBlock(id="newer", action="deploy release", priority=Priority.HIGH,
                         timestamp=NOW - timedelta(seconds=1))
    assert selector.scorer.score(older) == selector.scorer.score(newer) == 1.0  # both capped
    rom = rom_of_size(selector, tmp_path, 8000 - selector.estimate(newer) - 1)
    assert [b.id for b in selector.select([rom, older, newer], BUDGET).kept] == [
        "rom:lead", "newer"
    ]


def test_a_confidence_change_is_seen_by_the_next_selection(tmp_path: Path) -> None:
    selector = make_selector(tmp_path)
    manager = WorkingMemoryManager()
    a = HistoryBlock(id="a", action="x", confidence=0.9, priority=Priority.HIGH, timestamp=NOW)
    b = HistoryBlock(id="b", action="x", confidence=0.5, priority=Priority.HIGH, timestamp=NOW)
    rom = rom_of_size(selector, tmp_path, 8000 - selector.estimate(a) - 1)
    for block in (rom, a, b):
        manager.add(block)
    assert [k.id for k in selector.select(manager.blocks(), BUDGET).kept] == ["rom:lead", "a"]
    manager.update_confidence("a", 0.1)
    assert [k.id for k in selector.select(manager.blocks(), BUDGET).kept] == ["rom:lead", "b"]


def test_a_file_that_grew_is_estimated_again(tmp_path: Path) -> None:
    selector = make_selector(tmp_path, stat_ttl=0.0)
    (tmp_path / "notes.md").write_text("short")
    block = FileBlock(location="notes.md", timestamp=NOW)
    before = selector.select([block], 100_000).tokens["notes.md"]
    (tmp_path / "notes.md").write_text("long " * 3000)
    after = selector.select([block], 100_000).tokens["notes.md"]
    assert after > before + 4000


def test_big_files_count_as_compressed_to_the_block_cap(tmp_path: Path) -> None:
    selector = make_selector(tmp_path)
    (tmp_path / "huge.py").write_text("x = 1\n" * 50_000)
    block = FileBlock(location="huge.py", timestamp=NOW)
    assert selector.select([block], 100_000).tokens["huge.py"] < selector.max_block_tokens + 100
    uncapped = make_selector(tmp_path)
    uncapped.max_block_tokens = None
    assert uncapped.select([block], 1_000_000).tokens["huge.py"] > 90_000


def test_tokens_per_type_for_kept_and_dropped(tmp_path: Path) -> None:
    selector = make_selector(tmp_path)
    rom = rom_of_size(selector, tmp_path, 7_990)
    status = StatusBlock(status_type="mail", value=1, timestamp=NOW)
    history = HistoryBlock(action="x", priority=Priority.LOW, timestamp=NOW)
    selection = selector.select([rom, status, history], 8_000)
    assert selection.tokens_by_type() == {BlockType.ROM: 7_990}
    assert selection.dropped_tokens_by_type() == {
        BlockType.STATUS: selection.tokens[status.id],
        BlockType.HISTORY: selection.tokens[history.id],
    }


async def test_only_the_kept_files_are_ever_read(tmp_path: Path) -> None:
    # 10 000 blocks: ten one-line ranges of each of 1 000 files (creating files is slow).
    for f in range(1_000):
        (tmp_path / f"f{f:04d}.md").write_text("".join(f"f{f:04d} line {n}\n" for n in range(10)))
    counter = TokenCounter()
    loader = ContentLoader(tmp_path, counter)
    selector = MemorySelector(loader, counter, RelevanceScorer(now=lambda: NOW))
    blocks = [
        FileBlock(location=f"f{f:04d}.md", start_line=n + 1, end_line=n + 1,
                  priority=Priority.HIGH, timestamp=NOW - timedelta(seconds=f))
        for f in range(1_000)
        for n in range(10)
    ]
    each = selector.estimate(blocks[0])
    budget = (1_000 * each + 1) * 100 // 80 + 1  # room for exactly 1 000 under 80 %

    selection = selector.select(blocks, budget)
    assert len(selection.kept) == 1_000  # the newest: the ten ranges of f0000 ... f0099
    assert len(selection.dropped) == 9_000
    assert loader.files_read == 0  # selecting reads nothing

    built = await ContextBuilder(loader, counter).build(selection)
    assert len(built.entries) == 1_000
    assert loader.files_read == 100
    assert loader.bytes_read == sum((tmp_path / f"f{f:04d}.md").stat().st_size for f in range(100))
    assert {e["content"] for e in built.entries} == {
        f"f{f:04d} line {n}\n" for f in range(100) for n in range(10)
    }


def reference_selection(
    selector: MemorySelector, blocks: list[AnyBlock], budget: int
) -> list[str]:
    """The selection rules written plainly, one block at a time (the seed's algorithm)."""
    size = {b.id: selector.estimate(b) for b in blocks}
    score = {b.id: selector.scorer.score(b, NOW) for b in blocks}
    kept = [b for b in blocks if b.priority is Priority.CRITICAL]
    used = sum(size[b.id] for b in kept)
    for priority, percent in ((Priority.HIGH, 80), (Priority.MEDIUM, 90), (Priority.LOW, 95)):
        tier = [b for b in blocks if b.priority is priority]
        tier.sort(key=lambda b: (-score[b.id], -b.timestamp.timestamp()))  # stable: input order
        for b in tier:
            if (used + size[b.id]) * 100 < budget * percent:
                kept.append(b)
                used += size[b.id]
    return [b.id for b in kept]


block_specs = st.lists(
    st.tuples(
        st.sampled_from(list(Priority)),
        st.sampled_from([0.05, 0.3, 0.5, 0.9, 1.0]),
        st.integers(min_value=0, max_value=20),  # age in minutes (ties are likely)
        st.integers(min_value=0, max_value=400),  # length of the text
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=block_specs, budget=st.integers(min_value=200, max_value=6_000))
def test_the_fast_selection_equals_the_plain_rules(
    tmp_path: Path, specs: list[tuple[Priority, float, int, int]], budget: int
) -> None:
    selector = make_selector(tmp_path)
    selector.scorer.set_task("deploy release notes")
    blocks: list[AnyBlock] = [
        HistoryBlock(id=f"h{i}", action="deploy" if i % 3 else "read", detail="x" * length,
                     priority=priority, confidence=confidence,
                     timestamp=NOW - timedelta(minutes=age))
        for i, (priority, confidence, age, length) in enumerate(specs)
    ]
    if sum(selector.estimate(b) for b in blocks if b.priority is Priority.CRITICAL) > budget:
        with pytest.raises(CriticalOverBudgetError):
            selector.select(blocks, budget, now=NOW)
        return
    expected = reference_selection(selector, blocks, budget)
    for _ in range(2):  # cold, then from the selector's caches
        selection = selector.select(blocks, budget, now=NOW)
        assert [b.id for b in selection.kept] == expected
        assert len(selection.kept) + len(selection.dropped) == len(blocks)
        assert selection.scores == {b.id: selector.scorer.score(b, NOW) for b in blocks}
    blocks[0].confidence = 1.0 - blocks[0].confidence  # an assignment: a new block version
    selection = selector.select(blocks, budget, now=NOW)
    assert [b.id for b in selection.kept] == reference_selection(selector, blocks, budget)


def test_scores_follow_task_keywords_and_recent_files_as_the_scorer_gives_them(
    tmp_path: Path,
) -> None:
    # The selector keeps each block's keywords and file between selections and scores in
    # bulk; every score must still be what RelevanceScorer.score says, as the task and
    # the recent files change.
    from hivemind.memory.blocks import ContextBlock, KnowledgeBlock, MessageBlock, TaskBlock

    selector = make_selector(tmp_path)
    old = NOW - timedelta(hours=2)  # old and unsure: boosts are not lost under the cap
    blocks: list[AnyBlock] = [
        FileBlock(location="src/deploy.py", timestamp=old, confidence=0.3),
        KnowledgeBlock(topic="Release notes", location="knowledge/release.md", timestamp=old,
                       confidence=0.3),
        TaskBlock(task_id="t1", title="Deploy the release", location="tasks/t1.md",
                  timestamp=old, confidence=0.3),
        TaskBlock(task_id="t2", title="Write notes", timestamp=old, confidence=0.3),
        MessageBlock(from_agent="ann", to_agent="bob", subject="deploy today",
                     full_path="mailboxes/bob/new/1.md", timestamp=old, confidence=0.3),
        HistoryBlock(action="read_file", detail="src/deploy.py", timestamp=old, confidence=0.3),
        ContextBlock(context_type="project", summary="release notes for deploy", timestamp=old,
                     confidence=0.3),
    ]
    for task, recent in [
        ("", []),
        ("deploy the release", []),
        ("deploy the release", ["src/deploy.py", "mailboxes/bob/new/1.md"]),
        ("write release notes", ["tasks/t1.md", "knowledge/release.md"]),
        ("write release notes", []),
    ]:
        selector.scorer.set_task(task)
        selector.scorer.set_recent_files(recent)
        selection = selector.select(blocks, BUDGET, now=NOW)
        assert selection.scores == {b.id: selector.scorer.score(b, NOW) for b in blocks}
        assert len(set(selection.scores.values())) > 1 or not task
