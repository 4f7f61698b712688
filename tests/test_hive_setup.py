"""hive.toml, `init`'s scaffold and the disk-only status."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from hivemind.cli.hive_status import hive_status
from hivemind.errors import ConfigError
from hivemind.hive.config import load_hive_config
from hivemind.hive.frontmatter import read_rom
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import PostOffice
from hivemind.hive.models import TaskState
from hivemind.hive.scaffold import EXAMPLE_AGENT, init_hive, render_hive_toml, scaffold
from hivemind.hive.tasks.board import TaskBoard
from hivemind.settings import AgentSettings, HiveConfig


def test_missing_hive_toml_means_defaults(hive: Hive) -> None:
    assert load_hive_config(hive) == HiveConfig()


def test_hive_toml_overrides_defaults(hive: Hive) -> None:
    hive.config_file.write_text("[daemon]\nrescan_interval = 2.5\n\n[agents]\nheartbeat = 60\n")
    config = load_hive_config(hive)
    assert config.daemon.rescan_interval == 2.5
    assert config.agents.heartbeat == 60
    assert config.provider == HiveConfig().provider


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "[daemon]\nposll = true\n",
            "hive.toml: line 2: daemon.posll is not a known field",
            id="unknown-key",
        ),
        pytest.param(
            "# settings\n[daemon]\nrescan_interval = -1\n",
            "hive.toml: line 3: daemon.rescan_interval must be > 0 (got -1)",
            id="out-of-range",
        ),
        pytest.param(
            '[provider]\nname = "openai"\n',
            "hive.toml: line 2: provider.name must be one of auto, anthropic, offline "
            "(got 'openai')",
            id="bad-choice",
        ),
        pytest.param("[daemon\n", "hive.toml: invalid TOML:", id="bad-toml"),
    ],
)
def test_invalid_hive_toml_names_file_key_and_problem(hive: Hive, text: str, message: str) -> None:
    hive.config_file.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_hive_config(hive)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_generated_hive_toml_parses_to_the_defaults_commented_or_not() -> None:
    text = render_hive_toml()
    assert HiveConfig.model_validate(tomllib.loads(text)) == HiveConfig()
    # Uncomment every setting line: the values written out are exactly the defaults.
    live = re.sub(r"^# (?=\[|[A-Za-z_]+ = )", "", text, flags=re.MULTILINE)
    data = tomllib.loads(live)
    assert data["daemon"]["rescan_interval"] == HiveConfig().daemon.rescan_interval
    assert HiveConfig.model_validate(data) == HiveConfig()


def test_generated_hive_toml_lists_every_setting() -> None:
    text = render_hive_toml()
    for section in ("agents", "daemon", "provider", "memory"):
        model = getattr(HiveConfig(), section)
        for key in type(model).model_fields:
            pattern = rf"^(#+ {key}( =|:)|# \[{section}\.{key}\])"
            assert re.search(pattern, text, re.MULTILINE), f"{section}.{key}"


def test_init_creates_a_working_hive(tmp_path: Path) -> None:
    report = scaffold(tmp_path / "new")
    hive = report.hive
    assert hive.rom_path(EXAMPLE_AGENT).is_file()
    config = read_rom(hive.rom_path(EXAMPLE_AGENT), EXAMPLE_AGENT, AgentSettings())
    assert config.role and config.skills and "complete_task" in config.instructions
    assert (hive.root / "README.md").read_text().count("tasks/") > 3
    assert list(hive.knowledge_dir.glob("*.md"))
    for box in (EXAMPLE_AGENT, HUMAN):
        assert (hive.mailbox_dir(box) / "new").is_dir()
    assert load_hive_config(hive) == HiveConfig()
    assert report.skipped == []


def test_init_never_overwrites_existing_files(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    (root / "README.md").write_text("my own readme\n")
    report = scaffold(root)
    assert (root / "README.md").read_text() == "my own readme\n"
    assert report.skipped == [report.hive.root / "README.md"]
    again = scaffold(root)
    assert again.created == [] and len(again.skipped) == len(report.created) + 1
    assert init_hive(root).root == report.hive.root


def test_status_shows_agents_tasks_mail_rejects_and_rom_errors(hive: Hive) -> None:
    for name, rom in {
        "ann": "---\nrole: Writer\n---\nWrite.\n",
        "bob": "---\nrole: x\nmax_context_tokens: 500\n---\nBroken.\n",
    }.items():
        hive.agent_dir(name).mkdir()
        hive.rom_path(name).write_text(rom)
    board = TaskBoard(hive, settle_time=0)
    (hive.tasks_dir / "a.md").write_text("# A\n")
    (hive.tasks_dir / "bad.md").write_text("---\npriority: urgent\n---\n")
    [ref] = board.scan_pending()
    board.claim(ref, "ann")
    PostOffice(hive).send("ann", HUMAN, "Hi", "hello")
    status = hive_status(hive)
    agents = {a.name: a for a in status.agents}
    assert agents["ann"].ok and agents["ann"].active_tasks == 1
    assert not agents["bob"].ok
    assert agents["bob"].error == (
        "agents/bob/ROM.md: line 3: max_context_tokens must be ≥ 1000 (got 500)"
    )
    assert status.tasks[TaskState.ACTIVE] == 1 and status.tasks[TaskState.REJECTED] == 1
    assert status.mail[HUMAN] == 1
    [bad] = status.rejected
    assert bad.file == "tasks/rejected/bad.md"
    assert bad.reason.startswith("line 2: priority must be one of")
    assert status.daemon is None


def test_status_includes_the_daemon_file_raw(hive: Hive) -> None:
    hive.status_file.write_text(json.dumps({"pid": 123, "agents": {"ann": {"state": "idle"}}}))
    assert hive_status(hive).daemon == {"pid": 123, "agents": {"ann": {"state": "idle"}}}


def test_status_reports_a_broken_hive_toml_instead_of_failing(hive: Hive) -> None:
    hive.config_file.write_text("[daemon]\nrescan_interval = 0\n")
    status = hive_status(hive)
    assert status.config_error is not None and "rescan_interval must be > 0" in status.config_error
