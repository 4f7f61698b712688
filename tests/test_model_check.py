"""An unknown model id is said at the daemon's start and in `hivemind status`, from the
provider's model list (GET /v1/models) where it has one, else from the ids the hive
knows; a failing or slow list never holds anything up."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.cli.hive_status import hive_status
from hivemind.hive.layout import Hive
from hivemind.hive.rom import RomRegistry
from hivemind.llm.catalog import (
    CATALOG_FILE,
    LISTED_MOST,
    ModelCatalog,
    fetch_catalog,
    model_problem,
)
from hivemind.llm.offline import OfflineProvider
from hivemind.settings import AgentSettings
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply, error_reply
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import task_completer

KNOWN = {"claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"}


def model_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "model '" in r.getMessage()]


@pytest.mark.parametrize(
    ("model", "listed"),
    [
        pytest.param("claude-sonnet-5-5", ["claude-sonnet-5-5"], id="listed"),
        pytest.param("claude-sonnet-5-5", ["claude-sonnet-5-5-20261001"], id="undated-of-a-dated"),
        pytest.param("claude-sonnet-5-5-20261001", ["claude-sonnet-5-5"], id="dated-of-undated"),
    ],
)
def test_a_listed_model_is_no_problem(model: str, listed: list[str]) -> None:
    catalog = ModelCatalog(provider="anthropic", checked_at="2026-01-01T00:00:00Z", ids=listed)
    assert model_problem(model, catalog, KNOWN) is None


@pytest.mark.parametrize(
    ("model", "said"),
    [
        pytest.param("claude-sonet-5-5", "(did you mean claude-sonnet-5-5?)", id="typo"),
        pytest.param("claude-sonnet", "is not one anthropic lists", id="a-stem-is-not-an-id"),
        pytest.param("claude-haiku-5-5", "is not one anthropic lists:", id="not-served-here"),
    ],
)
def test_an_unlisted_model_is_one_line(model: str, said: str) -> None:
    catalog = ModelCatalog(provider="anthropic", checked_at="2026-01-01T00:00:00Z",
                           ids=["claude-opus-5-5", "claude-sonnet-5-5"])
    problem = model_problem(model, catalog, KNOWN)
    assert problem is not None and said in problem and "\n" not in problem


def test_the_provider_list_is_read_page_by_page() -> None:
    with FakeAnthropic() as api:
        api.models = [f"model-{n}" for n in range(2_345)]
        catalog = asyncio.run(fetch_catalog(scripted_model.provider(api), "anthropic"))
        pages = [r for r in api.requests if r.path == "/v1/models"]
    assert isinstance(catalog, ModelCatalog) and catalog.ids == api.models
    assert len(pages) == 3


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(error_reply(404, "not_found_error", "no such route", None), id="no-list"),
        pytest.param(error_reply(500, "api_error", "boom", None), id="server-error"),
        pytest.param(Reply(hang=True), id="no-answer"),
    ],
)
def test_a_list_that_cannot_be_had_says_why_within_the_time(reply: Reply) -> None:
    with FakeAnthropic() as api:
        api.models_reply = reply
        got = asyncio.run(fetch_catalog(scripted_model.provider(api), "anthropic", within=0.5))
    assert isinstance(got, str) and got


def test_daemon_start_names_the_agent_whose_model_the_provider_does_not_list(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(hive, "ann", "model: claude-sonet-5-5\n")
    write_agent(hive, "bob", "model: opus\n")
    caplog.set_level(logging.WARNING)
    with FakeAnthropic() as api:
        api.models = ["claude-opus-5-5", "claude-sonnet-5-5"]
        run_until_idle(hive, scripted_model.provider(api))
        assert not api.message_requests  # said before any call, not by its 404
    assert model_lines(caplog) == [
        "agents/ann/ROM.md: model 'claude-sonet-5-5' is not one anthropic lists (did you "
        "mean claude-sonnet-5-5?): its calls would fail; fix `model:`"
    ]
    saved = ModelCatalog.read(hive.state_dir / CATALOG_FILE, hive.root)
    assert saved is not None and saved.ids == api.models


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(error_reply(500, "api_error", "boom", None), id="failing-list"),
        pytest.param(Reply(hang=True), id="list-never-answers"),
    ],
)
def test_a_failing_or_slow_list_neither_blocks_nor_flags(
    hive: Hive, caplog: pytest.LogCaptureFixture, reply: Reply
) -> None:
    write_agent(hive, "ann", "model: some-proxy-model\n")
    write_task(hive, "t1")
    caplog.set_level(logging.WARNING)
    with FakeAnthropic() as api:
        api.models_reply = reply
        api.responder = task_completer
        run_until_idle(hive, scripted_model.provider(api))
    assert (hive.done_dir / "t1.md").exists()
    assert model_lines(caplog) == []


def test_without_a_provider_list_the_known_ids_are_the_check(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(hive, "ann", "model: claude-haiku-5-5\n")
    write_agent(hive, "bob", "model: claude-hiaku-5-5\n")
    caplog.set_level(logging.WARNING)
    run_until_idle(hive, OfflineProvider())
    [line] = model_lines(caplog)
    assert line.startswith("agents/bob/ROM.md: model 'claude-hiaku-5-5' is not a known model "
                           "id (did you mean claude-haiku-5-5?)")


def test_a_models_alias_makes_a_local_model_known(hive: Hive) -> None:
    hive.config_file.write_text('[models]\nlocal = "llama-70b"\n')
    write_agent(hive, "ann", "model: llama-70b\n")
    assert hive_status(hive).agents[0].warnings == []


def test_status_flags_an_unknown_model_from_the_known_ids(hive: Hive) -> None:
    write_agent(hive, "ann", "model: claude-opus-9\n")
    [warning] = hive_status(hive).agents[0].warnings
    assert warning.startswith("model 'claude-opus-9' is not a known model id")


def test_status_flags_what_the_daemons_provider_list_lacks(hive: Hive) -> None:
    write_agent(hive, "ann", "model: haiku\n")
    with FakeAnthropic() as api:
        api.models = ["claude-opus-5-5", "claude-sonnet-5-5"]
        run_until_idle(hive, scripted_model.provider(api))
    [warning] = hive_status(hive).agents[0].warnings
    assert warning.startswith("model 'claude-haiku-5-5' is not one anthropic lists")
    shown = CliRunner().invoke(app, ["status", "--hive", str(hive.root)]).output
    assert "agents/ann/ROM.md: model 'claude-haiku-5-5' is not one anthropic lists" in " ".join(
        shown.split())


def test_a_broken_saved_list_falls_back_to_the_known_ids(hive: Hive) -> None:
    write_agent(hive, "ann", "model: sonnet\n")
    hive.state_dir.mkdir(exist_ok=True)
    (hive.state_dir / CATALOG_FILE).write_text("{not json")
    assert hive_status(hive).agents[0].warnings == []


def test_a_rom_edited_to_an_unknown_model_is_said_as_it_is_read(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = ModelCatalog(provider="anthropic", checked_at="2026-01-01T00:00:00Z",
                           ids=sorted(KNOWN))
    roms = RomRegistry(hive, AgentSettings())
    path = write_agent(hive, "ann", "model: opus\n")
    roms.load("ann")
    roms.model_problem = lambda model: model_problem(model, catalog, KNOWN)
    roms.check_again()
    assert roms.warnings("ann") == []
    caplog.set_level(logging.WARNING)
    path.write_text(path.read_text().replace("opus", "claude-opus-9"))
    os.utime(path, (time.time() - 5, time.time() - 5))
    roms.load("ann")
    assert model_lines(caplog) == [
        "agents/ann/ROM.md: model 'claude-opus-9' is not one anthropic lists (did you mean "
        "claude-opus-5-5?): its calls would fail; fix `model:`"
    ]
    assert roms.warnings("ann") == [model_lines(caplog)[0].split(": ", 1)[1]]


def test_a_saved_list_is_read_no_longer_than_the_daemon_reads_one(hive: Hive) -> None:
    ids = [f"model-{n}" for n in range(LISTED_MOST)] + ["claude-sonnet-5-5"]
    ModelCatalog(provider="anthropic", checked_at="2026-01-01T00:00:00Z", ids=ids).write(
        hive.state_dir / CATALOG_FILE)
    saved = ModelCatalog.read(hive.state_dir / CATALOG_FILE, hive.root)
    assert saved is not None and len(saved.ids) == LISTED_MOST


def test_hivemind_run_says_the_unknown_model_on_its_console(hive: Hive) -> None:
    write_agent(hive, "ann", "model: claude-sonet-5-5\n")
    with FakeAnthropic() as api:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update(PYTHONPATH=str(Path(__file__).resolve().parents[1]),
                   ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=api.base_url)
        run = subprocess.run([sys.executable, "-m", "hivemind", "run", "--until-idle",
                              str(hive.root)], env=env, capture_output=True, text=True,
                             timeout=90, check=False)  # fmt: skip
    said = [line for line in (run.stdout + run.stderr).splitlines() if "claude-sonet" in line]
    assert said == ["agents/ann/ROM.md: model 'claude-sonet-5-5' is not one anthropic lists "
                    "(did you mean claude-sonnet-5-5?): its calls would fail; fix `model:`"]
