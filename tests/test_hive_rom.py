"""ROM registry (last good config) and the knowledge index (stat-based refresh)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hivemind.agent.prompt import FixedTokens
from hivemind.cli.hive_status import hive_status
from hivemind.errors import ConfigError, UnknownAgentError
from hivemind.hive import rom as rom_module
from hivemind.hive.knowledge import KnowledgeIndex
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.memory.tokens import TokenCounter
from hivemind.settings import AgentConfig, AgentSettings
from hivemind.tools import default_registry


def write_rom(hive: Hive, name: str, text: str) -> Path:
    path = hive.rom_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    # A distinct mtime per edit, as an editor a moment later would give.
    stamp = time.time() - 10 + len(text) / 1000
    os.utime(path, (stamp, stamp))
    return path


GOOD = "---\nrole: Writer\nmax_context_tokens: 20000\n---\nWrite well.\n"
BAD = "---\nrole: Writer\nskills: [a]\nmax_context_tokens: 500\n---\nWrite well.\n"


def test_load_applies_hive_defaults_and_rom_fields(hive: Hive) -> None:
    write_rom(hive, "ann", GOOD)
    config = RomRegistry(hive, AgentSettings(max_output_tokens=777)).load("ann")
    assert (config.name, config.role, config.max_context_tokens) == ("ann", "Writer", 20000)
    assert config.max_output_tokens == 777
    assert config.instructions == "Write well."


def test_invalid_edit_keeps_the_last_good_config_and_records_the_error(hive: Hive) -> None:
    roms = RomRegistry(hive, AgentSettings())
    write_rom(hive, "ann", GOOD)
    good = roms.load("ann")
    write_rom(hive, "ann", BAD)
    assert roms.load("ann") == good
    assert (
        roms.error("ann")
        == "agents/ann/ROM.md: line 4: max_context_tokens must be ≥ 1000 (got 500)"
    )
    write_rom(hive, "ann", GOOD.replace("Writer", "Editor"))
    assert roms.load("ann").role == "Editor"
    assert roms.error("ann") is None


def daemons_registry(hive: Hive) -> RomRegistry:
    """A registry as the daemon has it: it keeps the last good ROMs on disk."""
    roms = RomRegistry(hive, AgentSettings())
    roms.saves_last_good = True
    return roms


def test_the_last_good_config_outlives_the_registry_that_read_it(hive: Hive) -> None:
    """A restart (a new registry: another run, or a command) finds the agent's last good
    ROM too: an invalid edit made while it was stopped does not stop the agent."""
    write_rom(hive, "ann", GOOD)
    good = daemons_registry(hive).load("ann")
    write_rom(hive, "ann", BAD)

    later = RomRegistry(hive, AgentSettings())  # a command's: it only looks

    assert later.load("ann") == good
    assert later.text("ann") == GOOD
    assert later.error("ann") == (
        "agents/ann/ROM.md: line 4: max_context_tokens must be ≥ 1000 (got 500)"
    )
    write_rom(hive, "ann", GOOD.replace("Writer", "Editor"))  # fixed: the new one counts
    assert daemons_registry(hive).load("ann").role == "Editor"
    write_rom(hive, "ann", BAD)
    assert RomRegistry(hive, AgentSettings()).load("ann").role == "Editor"


def test_a_registry_that_only_looks_saves_nothing(hive: Hive) -> None:
    write_rom(hive, "ann", GOOD)
    RomRegistry(hive, AgentSettings()).load("ann")
    assert not hive.last_good_rom_path("ann").parent.exists()


def test_a_saved_copy_that_is_not_valid_either_is_no_config(hive: Hive) -> None:
    write_rom(hive, "ann", BAD)
    saved = hive.last_good_rom_path("ann")
    saved.parent.mkdir(parents=True, exist_ok=True)
    saved.write_text("---\nmax_steps: 0\n---\nx\n")
    with pytest.raises(ConfigError, match="line 4: max_context_tokens"):
        RomRegistry(hive, AgentSettings()).load("ann")


def test_rom_never_valid_raises_config_error(hive: Hive) -> None:
    write_rom(hive, "ann", BAD)
    roms = RomRegistry(hive, AgentSettings())
    with pytest.raises(ConfigError, match="line 4: max_context_tokens"):
        roms.load("ann")
    assert roms.configs() == {}


def test_unchanged_rom_is_not_read_again(hive: Hive) -> None:
    path = write_rom(hive, "ann", GOOD)
    roms = RomRegistry(hive, AgentSettings())
    first = roms.load("ann")
    before = path.stat()
    # Same inode, size and mtime, different bytes: only a re-read could notice.
    path.write_text(GOOD.replace("Writer", "Wr1ter"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert roms.load("ann") is first
    os.utime(path)  # now it changed
    assert roms.load("ann").role == "Wr1ter"


def test_missing_rom_is_an_unknown_agent(hive: Hive) -> None:
    with pytest.raises(UnknownAgentError, match=r"agents/ghost/ROM\.md does not exist"):
        RomRegistry(hive, AgentSettings()).load("ghost")


def test_agents_and_configs_list_valid_agents(hive: Hive) -> None:
    write_rom(hive, "ann", GOOD)
    write_rom(hive, "bob", BAD)
    (hive.agents_dir / "no-rom").mkdir()
    roms = RomRegistry(hive, AgentSettings())
    assert roms.agents() == ["ann", "bob"]
    assert list(roms.configs()) == ["ann"]
    assert roms.error("bob") is not None


# -- knowledge ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        pytest.param("max_context_tokens: 3000\nmax_output_tokens: 4096\n",
                     "max_context_tokens 3000 less max_output_tokens 4096 leaves -1096 tokens",
                     id="output-over-context"),
        pytest.param("max_context_tokens: 1500\nmax_output_tokens: 1024\n",
                     "leaves 476 tokens for the context", id="no-room-for-a-context"),
        pytest.param("knowledge: ['does-not-exist/*.md']\n",
                     "knowledge: 'does-not-exist/*.md' matches no note", id="knowledge-glob"),
        pytest.param("watch: ['nomatch/**']\n", "watch: 'nomatch/**' matches no file",
                     id="watch-glob"),
    ],
)
def test_a_valid_rom_that_cannot_do_what_it_says_runs_with_a_logged_warning(
    hive: Hive, caplog: pytest.LogCaptureFixture, front: str, expected: str
) -> None:
    (hive.knowledge_dir / "style.md").write_text("# Style\n")
    write_rom(hive, "ann", f"---\n{front}---\nWrite well.\n")
    roms = RomRegistry(hive, AgentSettings())

    with caplog.at_level("WARNING", logger="hivemind.hive.rom"):
        config = roms.load("ann")
        roms.load("ann")

    assert config.name == "ann" and roms.error("ann") is None
    [warning] = roms.warnings("ann")
    assert expected in warning
    assert [r.getMessage() for r in caplog.records] == [f"agents/ann/ROM.md: {warning}"]


def test_the_room_for_a_context_is_told_net_of_the_prompt_and_tool_definitions(
    hive: Hive,
) -> None:
    """5,000 less 3,000 looks like room, but the preamble and tools take ~1,600 more."""
    write_rom(hive, "ann", "---\nmax_context_tokens: 5000\nmax_output_tokens: 3000\n---\n")
    fixed = FixedTokens(default_registry(), TokenCounter())
    roms = RomRegistry(hive, AgentSettings())
    roms.fixed_tokens = fixed
    roms.load("ann")

    [warning] = roms.warnings("ann")
    assert "and the system prompt and tool definitions (about " in warning
    assert hive_status(hive, fixed).agents[0].warnings == [warning]
    assert hive_status(hive).agents[0].warnings == []  # unknown, taken as none


def test_globs_that_match_files_and_room_for_a_context_warn_of_nothing(hive: Hive) -> None:
    (hive.knowledge_dir / "guides").mkdir()
    (hive.knowledge_dir / "guides" / "style.md").write_text("# Style\n")
    (hive.workspace_dir / "sub").mkdir()
    (hive.workspace_dir / "sub" / "w.md").write_text("w\n")
    write_rom(hive, "ann", "---\nmax_context_tokens: 3000\nmax_output_tokens: 2000\n"
              "knowledge: ['knowledge/guides/*.md', '**']\nwatch: ['workspace/**']\n---\n")
    roms = RomRegistry(hive, AgentSettings())
    roms.load("ann")
    assert roms.warnings("ann") == []


@pytest.mark.parametrize(
    ("text", "topic"),
    [("# Near the top\n" + "x" * 30_000, "Near the top"),
     ("x\n" * 2_100 + "# Past the first 4 KB\n", "late"),
     ("---\nnotes: |\n" + "  y\n" * 5_000 + "---\n# After 20 KB of front matter\n",
      "After 20 KB of front matter"),
     ("---\nnotes: |\n" + "  y\n" * 17_000 + "---\n# After 68 KB of front matter\n", "late"),
     ("---\nnever: closed\n" + "z\n" * 40_000 + "# Heading\n", "late")],
    ids=["heading-first", "heading-past-4kb", "long-front-matter", "front-matter-past-64kb",
         "front-matter-never-closed"],
)
def test_a_notes_topic_is_its_first_heading_near_the_top(
    hive: Hive, text: str, topic: str
) -> None:
    (hive.knowledge_dir / "late.md").write_text(text)
    index = KnowledgeIndex(hive)
    index.refresh()
    assert [n.topic for n in index.selected()] == [topic]


def _bytes_read() -> int:
    with open("/proc/self/io", encoding="ascii") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_listing_notes_reads_only_their_heads(hive: Hive) -> None:
    for n in range(100):
        (hive.knowledge_dir / f"n{n}.md").write_text(f"# Note {n}\n" + "words " * 4_000)
    index = KnowledgeIndex(hive)
    before = _bytes_read()
    index.refresh()
    read = _bytes_read() - before
    assert len(index.selected()) == 100
    assert read <= 100 * 4096 + 64 * 1024  # a head a note, and a little for the rest


def test_refresh_rereads_only_changed_notes(hive: Hive) -> None:
    note = hive.knowledge_dir / "a.md"
    note.write_text("# First\n")
    old = time.time() - 10
    os.utime(note, (old, old))
    index = KnowledgeIndex(hive)
    index.refresh()
    before = note.stat()
    note.write_text("# Other\n")  # same size; mtime put back: only a re-read could tell
    os.utime(note, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert index.refresh() is False
    assert [n.topic for n in index.selected()] == ["First"]
    os.utime(note)
    assert index.refresh() is True
    assert [n.topic for n in index.selected()] == ["Other"]


def test_what_every_request_carries_stays_under_the_bound_the_warning_relies_on() -> None:
    """The room warning counts the tools only where they could matter: below this bound."""
    fixed = FixedTokens(default_registry(), TokenCounter())
    assert fixed(AgentConfig(name="ann")) < rom_module.FIXED_TOKENS_MOST  # every tool


def test_a_watch_glob_is_not_told_unmatched_when_too_many_files_were_left_unlooked(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs on the daemon's loop: it looks at so many files, then gives up."""
    monkeypatch.setattr(rom_module, "GLOB_CHECK_FILES", 5)
    for n in range(10):
        (hive.workspace_dir / f"f{n}.md").write_text("x\n")
    write_rom(hive, "ann", "---\nwatch: ['workspace/*.txt']\n---\n")
    roms = RomRegistry(hive, AgentSettings())
    roms.load("ann")
    assert roms.warnings("ann") == []  # unknown after 5 files: not told
    monkeypatch.setattr(rom_module, "GLOB_CHECK_FILES", 50)
    roms = RomRegistry(hive, AgentSettings())
    roms.load("ann")
    assert roms.warnings("ann") == ["watch: 'workspace/*.txt' matches no file of the hive (yet)"]
