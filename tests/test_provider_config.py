"""`[provider]` of a real hive.toml picks the provider and its endpoint, and `hivemind run`
says once, up front, when no model is called (the offline provider)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from hivemind.cli.app import app
from hivemind.errors import ConfigError
from hivemind.hive import trust
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.llm.anthropic import AnthropicProvider
from hivemind.llm.select import make_provider
from tests.fake_anthropic import FakeAnthropic, Reply
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import task_completer

KEY_ENV = "HIVEMIND_TEST_PROVIDER_KEY"
KEY = "sk-ant-provider-config-test"
BANNER = "OFFLINE PROVIDER"
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing answers there


def completer(body: Any) -> Reply:
    """A scripted model: complete every active task in its context, then end its turn."""
    return task_completer(body, result="done by the fake model")


def key_sent(headers: dict[str, str]) -> str | None:
    """The API key a request carried (the SDK sends it as a bearer token or x-api-key)."""
    bearer = headers.get("authorization", "")
    return bearer.removeprefix("Bearer ") if bearer else headers.get("x-api-key")


def provider_toml(base_url: str) -> str:
    return (
        "[daemon]\nsettle_time = 0.0\n\n"
        f'[provider]\nbase_url = "{base_url}"\napi_key_env = "{KEY_ENV}"\n'
        "max_retries = 0\ntimeout = 5\n"
    )


def run_cli(hive: Hive, *flags: str) -> Result:
    return CliRunner().invoke(app, ["run", str(hive.root), "--until-idle", *flags])


# -- 5. [provider] base_url and the key variable ------------------------------------------


@contextmanager
def endpoint_in_hive_toml(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeAnthropic]:
    """A worker with task t1, and a fake API named only by a trusted hive.toml
    (`base_url`, and the key in KEY_ENV)."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = completer
        hive.config_file.write_text(provider_toml(api.base_url))
        trust.grant(hive, hive.config_file.read_bytes())
        monkeypatch.setenv(KEY_ENV, KEY)
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)  # set, it would win
        yield api


def test_base_url_in_hive_toml_is_where_the_requests_go(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    with endpoint_in_hive_toml(hive, monkeypatch) as api:
        provider = make_provider(load_hive_config(hive).provider)
        assert isinstance(provider, AnthropicProvider)
        run_until_idle(hive, provider)
        requests = api.message_requests

    assert requests, "no request reached the base_url of hive.toml"
    assert {key_sent(r.headers) for r in requests} == {KEY}
    assert "done by the fake model" in (hive.done_dir / "t1.md").read_text()


def test_hivemind_run_sends_to_the_base_url_of_hive_toml(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    with endpoint_in_hive_toml(hive, monkeypatch) as api:
        result = run_cli(hive)
        requests = api.message_requests

    assert result.exit_code == 0, result.output
    assert requests and {key_sent(r.headers) for r in requests} == {KEY}
    assert "done by the fake model" in (hive.done_dir / "t1.md").read_text()
    assert BANNER not in result.output
    assert KEY not in result.output


def test_without_the_key_nothing_runs_and_nothing_is_sent(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the key, the offline provider ran unasked and finished the task."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        hive.config_file.write_text(provider_toml(api.base_url))
        trust.grant(hive, hive.config_file.read_bytes())
        monkeypatch.delenv(KEY_ENV, raising=False)
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # another variable than hive.toml names
        with pytest.raises(ConfigError):
            make_provider(load_hive_config(hive).provider)
        result = run_cli(hive)
        requests = api.requests

    assert result.exit_code == 1, result.output
    assert requests == []
    assert BANNER not in result.output
    assert f"${KEY_ENV}" in " ".join(result.output.split())  # names the variable to set
    assert (hive.tasks_dir / "t1.md").exists()  # nothing ran
    assert not hive.audit_path("worker").exists()


@pytest.mark.parametrize(
    ("flags", "toml", "said"),
    [(["--offline"], "", "(--offline)"),
     ([], '[provider]\nname = "offline"\n', '([provider] name = "offline" in hive.toml)')],
    ids=["flag", "hive-toml"],
)
def test_offline_when_asked_says_how_it_was_asked(
    hive: Hive, flags: list[str], toml: str, said: str
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n" + toml)

    result = run_cli(hive, *flags)

    assert result.exit_code == 0, result.output
    assert f"{BANNER} {said}" in " ".join(result.output.split())
    assert (hive.done_dir / "t1.md").exists()  # the offline provider did the work


# -- 6. the offline banner ------------------------------------------------------------------


def several_agents_and_tasks(hive: Hive) -> None:
    hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
    for name in ("ann", "bob", "cy"):
        write_agent(hive, name)
    for i in range(6):
        write_task(hive, f"t{i}")


def test_offline_banner_is_printed_exactly_once(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    several_agents_and_tasks(hive)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    result = run_cli(hive, "--offline")

    assert result.exit_code == 0, result.output
    assert len(list(hive.done_dir.glob("*.md"))) == 6
    cycle_lines = [x for x in result.output.splitlines() if " tool call" in x]
    assert len(cycle_lines) >= 3  # several cycles ran, and the banner still came once
    assert result.output.count(BANNER) == 1
    assert result.output.index(BANNER) < result.output.index(cycle_lines[0])


def test_no_offline_banner_with_a_key(hive: Hive, monkeypatch: pytest.MonkeyPatch) -> None:
    several_agents_and_tasks(hive)
    with FakeAnthropic() as api:
        api.responder = completer
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        result = run_cli(hive)
        requests = api.message_requests

    assert result.exit_code == 0, result.output
    assert requests  # the model was called
    assert len(list(hive.done_dir.glob("*.md"))) == 6
    assert BANNER not in result.output
    assert "offline" not in result.output.lower()


def test_the_run_summary_names_a_model_with_no_price(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local model server: its model is in no price table, so the cost is unknown,
    # not $0.
    write_agent(hive, "worker", front="model: local-llama\n")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = completer
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        result = run_cli(hive)

    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "cost (estimate)" in line)
    assert "$0.0000 + unknown (see below)" in row
    assert ("cost: no price in hive.toml [pricing] for local-llama; its tokens are not in "
            "the estimate.") in result.output


def test_a_run_stopped_by_a_refused_key_ends_saying_why(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad key: the run exited 0 and the mail it had was marked read, unanswered."""
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.reply_error(401, "authentication_error", "invalid x-api-key", times=100)
        hive.config_file.write_text(provider_toml(api.base_url))
        trust.grant(hive, hive.config_file.read_bytes())
        monkeypatch.setenv(KEY_ENV, KEY)
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)  # set, it would win
        result = run_cli(hive)

    assert result.exit_code == 4, result.output  # paused (and t1 waits: paused wins)
    text = " ".join(result.output.split())
    assert ("paused: worker: ModelAccessError: claude-sonnet-5-5: HTTP 401 request "
            "refused: invalid x-api-key (the API key was not accepted: check "
            f"${KEY_ENV})") in text
    assert "t1 (no agent is taking work: worker is paused: " in text
    assert KEY not in result.output


def test_a_price_for_one_model_keeps_the_built_in_prices_of_the_others(hive: Hive) -> None:
    """One `[pricing."local-llama"]` table made every Claude model unpriced."""
    hive.config_file.write_text(
        '[pricing."local-llama"]\ninput = 0.1\noutput = 0.2\ncache_write = 0.1\n'
        "cache_read = 0.01\n"
    )
    pricing = load_hive_config(hive).pricing
    assert pricing["local-llama"].input == 0.1
    assert "claude-sonnet-5-5" in pricing


@pytest.mark.parametrize(("url", "problem"), [
    ("127.0.0.1:8080", "must start with http:// or https:// (got '127.0.0.1:8080')"),
    ("http://127.0.0.1:8080/v1", "must not end with /v1"),
])
def test_a_base_url_that_cannot_work_is_refused_at_start(
    hive: Hive, url: str, problem: str
) -> None:
    """It was taken, and every cycle failed ('connection to  failed', or a 404 that
    blamed the model) for as long as the daemon ran."""
    hive.config_file.write_text(f'[provider]\nbase_url = "{url}"\n')
    with pytest.raises(ConfigError, match="line 2: provider.base_url: " + re.escape(problem)):
        load_hive_config(hive)
    hive.config_file.unlink()
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": url}
    with pytest.raises(ConfigError, match=r"\$ANTHROPIC_BASE_URL: base_url: "
                       + re.escape(problem)):
        make_provider(load_hive_config(hive).provider, env)
