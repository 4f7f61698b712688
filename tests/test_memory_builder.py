"""ContextBuilder: the JSON context, stable prefix first, within the hard budget."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hivemind.errors import CriticalOverBudgetError
from hivemind.memory.blocks import (
    AnyBlock,
    ContextBlock,
    FileBlock,
    HistoryBlock,
    KnowledgeBlock,
    MessageBlock,
    Priority,
    RomBlock,
    StatusBlock,
    TaskBlock,
)
from hivemind.memory.builder import BuiltContext, ContextBuilder
from hivemind.memory.compressor import MemoryCompressor
from hivemind.memory.loader import ContentLoader
from hivemind.memory.mailids import mail_entry_id
from hivemind.memory.relevance import RelevanceScorer
from hivemind.memory.selector import MemorySelector
from hivemind.memory.tokens import TokenCounter

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Engine:
    """A counter, loader, selector and builder over one folder, as a cycle wires them."""

    def __init__(self, root: Path, compressor: bool = True) -> None:
        self.counter = TokenCounter()
        self.loader = ContentLoader(root, self.counter)
        self.selector = MemorySelector(self.loader, self.counter,
                                       RelevanceScorer(now=lambda: NOW), stat_ttl=0.0)
        squeeze = MemoryCompressor(counter=self.counter) if compressor else None
        self.builder = ContextBuilder(self.loader, self.counter, squeeze)

    async def build(self, blocks: list[AnyBlock], budget: int = 50_000) -> BuiltContext:
        return await self.builder.build(self.selector.select(blocks, budget))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "agents/lead").mkdir(parents=True)
    (tmp_path / "agents/lead/ROM.md").write_text("# lead\nYou split work and delegate it.\n")
    (tmp_path / "knowledge").mkdir()
    (tmp_path / "knowledge/delegation.md").write_text("# Delegation\nOne owner per step.\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src/app.py").write_text("def main():\n    return 1\n")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks/t1.md").write_text("---\nid: t1\n---\nWrite the notes.\n")
    return tmp_path


def every_kind() -> list[AnyBlock]:
    """One block of each type, listed volatile-first to prove the builder reorders them."""
    return [
        StatusBlock(status_type="mail", value={"new": 1}, timestamp=NOW),
        HistoryBlock(id="history:2", action="read_file", detail="src/app.py", timestamp=NOW),
        HistoryBlock(id="history:1", action="list_files", timestamp=NOW),
        MessageBlock(from_agent="human", to_agent="lead", subject="hi", full_path="mail/1.md",
                     timestamp=NOW),
        TaskBlock(task_id="t1", title="Write the notes", location="tasks/t1.md", timestamp=NOW),
        ContextBlock(context_type="project", summary="Release 0.2", timestamp=NOW),
        FileBlock(location="src/app.py", start_line=1, end_line=1, timestamp=NOW),
        FileBlock(location="src/app.py", timestamp=NOW),
        KnowledgeBlock(topic="Delegation", location="knowledge/delegation.md", timestamp=NOW),
        RomBlock(agent="lead", location="agents/lead/ROM.md", timestamp=NOW),
    ]


async def test_entries_have_the_documented_shape(root: Path) -> None:
    built = await Engine(root).build(every_kind())
    for entry in built.entries:
        # confidence and priority only when not at their defaults (1.0, the type's own)
        assert [k for k in entry if k not in ("confidence", "priority")] == [
            "id", "content", "metadata"]
        assert entry.get("priority", "high") in {"critical", "high", "medium", "low"}
        meta = entry["metadata"]
        if meta["type"] == "knowledge":  # a note is shown as it is now, with no time
            assert list(meta)[:1] == ["type"] and "timestamp" not in meta
            continue
        assert list(meta)[:2] == ["type", "timestamp"]
        assert datetime.fromisoformat(meta["timestamp"]) == NOW
    by_id = {e["id"]: e for e in built.entries}
    assert by_id["rom:lead"]["content"].startswith("# lead")
    assert "priority" not in by_id["rom:lead"]  # a ROM is always critical
    assert by_id["src/app.py:1-1"]["content"] == "def main():\n"
    assert by_id["src/app.py:1-1"]["metadata"]["lines"] == "1-1"
    assert by_id["task:t1"]["metadata"]["task_id"] == "t1"
    assert by_id["status:mail"]["content"] == '{"new":1}'  # compact: a space is a token


async def test_stable_blocks_come_first_in_context_order_then_by_id(root: Path) -> None:
    built = await Engine(root).build(every_kind())
    assert [e["id"] for e in built.entries] == [
        "rom:lead",
        "knowledge/delegation.md",
        "src/app.py",
        "src/app.py:1-1",
        "history:1",
        "history:2",
        "context:project",
        "task:t1",
        mail_entry_id("1.md"),
        "status:mail",
    ]
    assert built.stable_count == 4


async def test_a_cycle_that_only_adds_history_keeps_the_old_context_up_to_its_history(
    root: Path,
) -> None:
    # History only grows (oldest first) while tasks, mail and status change wholesale:
    # with history first among the volatile blocks, the previous context survives up
    # to its last history entry, which a prompt cache can serve.
    engine = Engine(root)
    first = (await engine.build(every_kind())).to_json()
    later_blocks = [b for b in every_kind() if not isinstance(b, StatusBlock)]
    later_blocks += [HistoryBlock(id="history:3", action="write_file", timestamp=NOW),
                     StatusBlock(status_type="mail", value={"new": 2}, timestamp=NOW)]
    later = (await engine.build(later_blocks)).to_json()
    kept = first[: first.index('{"id":"context:project"')]
    assert later.startswith(kept)
    assert '"history:2"' in kept


async def test_json_parts_concatenate_to_the_whole_context(root: Path) -> None:
    built = await Engine(root).build(every_kind())
    stable, volatile = built.json_parts()
    assert stable + volatile == built.to_json()
    assert built.to_json() == json.dumps(built.entries, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(built.to_json()) == built.entries
    assert json.loads(stable + "]") == built.entries[: built.stable_count]


async def test_the_stable_part_does_not_change_when_only_volatile_blocks_do(root: Path) -> None:
    engine = Engine(root)
    first = await engine.build(every_kind())
    later = await engine.build([*every_kind(), HistoryBlock(action="new", timestamp=NOW)])
    assert later.json_parts()[0] == first.json_parts()[0]
    assert later.json_parts()[1] != first.json_parts()[1]


async def test_unchanged_inputs_give_byte_identical_json(root: Path) -> None:
    a = await Engine(root).build(every_kind())
    b = await Engine(root).build(list(reversed(every_kind())))
    assert a.to_json() == b.to_json()


async def test_the_token_total_is_the_real_count_of_the_json(root: Path) -> None:
    engine = Engine(root)
    built = await engine.build(every_kind())
    real = engine.counter.count(built.to_json())
    assert abs(built.tokens - real) <= len(built.entries) * 2  # joins may merge a token
    assert sum(built.token_counts.values()) + 2 == built.tokens


async def test_a_second_build_of_unchanged_files_reads_and_tokenises_nothing(root: Path) -> None:
    engine = Engine(root)
    first = await engine.build(every_kind())
    read, tokenised = engine.loader.bytes_read, engine.counter.tokenised
    second = await engine.build(every_kind())
    assert engine.loader.bytes_read == read
    assert engine.counter.tokenised == tokenised
    assert second.to_json() == first.to_json()


async def test_a_changed_file_is_read_again(root: Path) -> None:
    engine = Engine(root)
    blocks = every_kind()
    await engine.build(blocks)
    path = root / "src/app.py"
    mtime = path.stat().st_mtime_ns
    path.write_text("def main():\n    return 2  # changed\n")
    os.utime(path, ns=(mtime + 10**9, mtime + 10**9))
    built = await engine.build(blocks)
    entry = next(e for e in built.entries if e["id"] == "src/app.py")
    assert "changed" in entry["content"]


async def test_a_missing_file_becomes_a_noted_entry(root: Path) -> None:
    built = await Engine(root).build([FileBlock(location="src/gone.py", timestamp=NOW)])
    (entry,) = built.entries
    assert entry["content"] == "[file not found: src/gone.py]"
    assert entry["metadata"]["note"] == "missing"
    assert built.notes == {"src/gone.py": "missing"}


async def test_a_latin1_file_is_its_text_with_the_encoding_it_was_read_with(
    root: Path,
) -> None:
    (root / "notes.md").write_bytes("# Café notes\nrésumé\n".encode("latin-1"))
    built = await Engine(root).build([FileBlock(location="notes.md", timestamp=NOW)])
    (entry,) = built.entries
    assert entry["content"] == "# Café notes\nrésumé\n"
    assert entry["metadata"]["encoding"] == "cp1252 (not UTF-8)"
    assert "note" not in entry["metadata"]


async def test_a_message_with_its_body_is_that_body_and_its_fields_are_metadata(
    root: Path,
) -> None:
    (root / "mail").mkdir()
    (root / "mail/1.md").write_text("---\nid: m1\nfrom: human\nsubject: hi\n---\nHello there.\n")
    block = MessageBlock(from_agent="human", to_agent="lead", subject="hi",
                         full_path="mail/1.md", body="Hello there.", timestamp=NOW)
    built = await Engine(root).build([block])
    (entry,) = built.entries
    assert entry["content"] == "Hello there."
    assert entry["metadata"]["from"] == "human" and entry["metadata"]["subject"] == "hi"


async def test_an_oversized_python_file_is_sent_as_its_signatures(root: Path) -> None:
    source = "".join(
        f"def function_{i}(a: int, b: str = 'x') -> bool:\n"
        f'    """Function {i} does one thing."""\n'
        + "    value = a * 2\n" * 40
        + "    return bool(value)\n\n"
        for i in range(150)
    )
    (root / "src/big.py").write_text(source)
    engine = Engine(root)
    built = await engine.build([FileBlock(location="src/big.py", timestamp=NOW)])
    (entry,) = built.entries
    assert entry["content"].startswith("[compressed: signatures of src/big.py, ")
    assert "def function_149(a: int, b: str='x') -> bool:" in entry["content"]
    assert built.notes == {"src/big.py": "compressed"}
    assert entry["metadata"]["note"] == "compressed"
    assert built.tokens <= 8000 + 200


async def test_real_counts_over_the_budget_drop_the_least_relevant(root: Path) -> None:
    # Control characters are 1 byte on disk but 6 characters (\u0001) in JSON: the
    # size-based estimate is several times too low.
    for name in ("dense_a.txt", "dense_b.txt"):
        (root / name).write_text("\x01\x02\x03\x04" * 100)  # ~1 200 tokens, estimated ~140
    engine = Engine(root, compressor=False)
    rom = RomBlock(agent="lead", location="agents/lead/ROM.md", timestamp=NOW)
    sure = FileBlock(location="dense_a.txt", confidence=0.9, timestamp=NOW)
    unsure = FileBlock(location="dense_b.txt", confidence=0.4, timestamp=NOW)
    selection = engine.selector.select([rom, sure, unsure], 2_000)
    assert len(selection.kept) == 3  # the estimates fit

    built = await engine.builder.build(selection)

    assert built.tokens <= 2_000
    assert [e["id"] for e in built.entries] == ["rom:lead", "dense_a.txt"]
    (late,) = built.dropped
    assert late.block is unsure
    assert late.reason.startswith(f"over budget after loading: {late.tokens} tokens (estimated")


async def test_critical_blocks_over_the_budget_after_loading_raise(root: Path) -> None:
    (root / "agents/lead/ROM.md").write_text("\x01" * 3000)
    engine = Engine(root)
    rom = RomBlock(agent="lead", location="agents/lead/ROM.md", timestamp=NOW)
    selection = engine.selector.select([rom], 5_000)
    with pytest.raises(CriticalOverBudgetError, match="rom:lead"):
        await engine.builder.build(selection)


async def test_without_types_removes_entries_and_their_tokens(root: Path) -> None:
    built = await Engine(root).build(every_kind())
    rest = built.without_types({"rom"})
    assert [e["id"] for e in rest.entries] == [e["id"] for e in built.entries[1:]]
    assert rest.stable_count == built.stable_count - 1
    assert rest.tokens == built.tokens - built.token_counts["rom:lead"]
    assert "".join(rest.json_parts()) == json.dumps(rest.entries, ensure_ascii=False,
                                                    separators=(",", ":"))


async def test_expired_blocks_never_reach_the_context(root: Path) -> None:
    stale = StatusBlock(status_type="old", timestamp=NOW, expiry=NOW - timedelta(minutes=1))
    built = await Engine(root).build([stale])
    assert built.entries == []
    assert built.to_json() == "[]"


async def test_entry_timestamps_are_the_blocks_times_to_the_second(root: Path) -> None:
    # UTC times are rendered from a memo keyed by the second, as `…Z`: every field of
    # the time must count, and other zones and naive times render as isoformat does.
    from datetime import timezone

    base = datetime(2026, 3, 4, 5, 6, 7, 890_000, tzinfo=UTC)
    times = [base + timedelta(seconds=s) for s in (0, 1, 60, 3600, 86_400, 31 * 86_400)]
    times += [base + timedelta(days=366), base.replace(year=2027)]
    times += [base.astimezone(timezone(timedelta(hours=2))), base.replace(tzinfo=None)]
    engine = Engine(root)
    for _ in range(2):
        blocks: list[AnyBlock] = [
            HistoryBlock(id=f"history:{i}", action="wait", timestamp=t)
            for i, t in enumerate(times)
        ]
        built = await engine.build(blocks)
        shown = {e["id"]: e["metadata"]["timestamp"] for e in built.entries}
        assert shown == {
            f"history:{i}": t.isoformat(timespec="seconds").replace("+00:00", "Z")
            if t.tzinfo is UTC else t.isoformat(timespec="seconds")
            for i, t in enumerate(times)
        }
        # `Z` is UTC: the time read back is the block's, to the second.
        assert datetime.fromisoformat(shown["history:0"]) == base.replace(microsecond=0)
    assert shown["history:0"] == "2026-03-04T05:06:07Z"  # not "+00:00": 3 tokens more


async def test_an_entry_leaves_out_the_fields_at_their_defaults(root: Path) -> None:
    """Each field costs tokens in every request: only what differs from its default is
    sent (confidence 1, the type's usual priority, empty or false metadata, a source
    that is the id)."""
    blocks = [
        KnowledgeBlock(topic="Delegation", location="knowledge/delegation.md", timestamp=NOW),
        FileBlock(location="notes.md", confidence=0.4, priority=Priority.HIGH, timestamp=NOW),
        MessageBlock(from_agent="human", to_agent="lead", full_path="mail/1.md",
                     body="Hello", timestamp=NOW),
    ]
    (root / "knowledge").mkdir(exist_ok=True)
    (root / "knowledge" / "delegation.md").write_text("# Delegation\n")
    (root / "notes.md").write_text("n\n")
    by_id = {e["id"]: e for e in (await Engine(root).build(blocks)).entries}
    note = by_id["knowledge/delegation.md"]
    assert set(note) == {"id", "content", "metadata"}
    assert "source" not in note["metadata"]
    unsure = by_id["notes.md"]
    assert (unsure["confidence"], unsure["priority"]) == (0.4, "high")
    mail = by_id[mail_entry_id("1.md")]["metadata"]
    assert "subject" not in mail and "read" not in mail and "source" not in mail
    assert mail["from"] == "human"
    assert "to" not in mail  # the mail is in the agent's own mailbox: it is to the agent


async def test_a_history_entry_says_its_action_once_in_its_text(root: Path) -> None:
    block = HistoryBlock(action="write_file", detail="workspace/a.md", result="written",
                         metadata={"cycle": 3}, timestamp=NOW)
    [entry] = (await Engine(root).build([block])).entries
    assert entry["content"] == "write_file: workspace/a.md -> written"
    assert entry["id"].endswith(":write_file")
    assert "action" not in entry["metadata"] and entry["metadata"]["cycle"] == 3


@pytest.mark.parametrize(
    ("block", "meta"),
    [
        pytest.param(ContextBlock(context_type="followup", summary="You hold t1 (Do it).",
                                  related_ids=["t1"], timestamp=NOW), {}, id="all-said"),
        pytest.param(ContextBlock(id="context:earlier:t1", context_type="earlier",
                                  summary="Steps of t1.", related_ids=["t1", "t2"],
                                  timestamp=NOW),
                     {"context_type": "earlier", "related_ids": ["t1", "t2"]}, id="not-said"),
    ],
)
async def test_a_summary_entry_says_its_type_and_ids_once(
    root: Path, block: ContextBlock, meta: dict[str, Any]
) -> None:
    [entry] = (await Engine(root).build([block])).entries
    assert {k: v for k, v in entry["metadata"].items() if k not in ("type", "timestamp")} == meta
