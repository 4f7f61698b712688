"""`hivemind run` options: --agents, --max-cycles, --poll (offline provider, real hives)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from hivemind.cli.app import app
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.layout import Hive
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import CountingProvider, fast_config, write_agent, write_task


def run(hive: Hive, *args: str) -> Result:
    hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
    return CliRunner().invoke(
        app, ["run", str(hive.root), "--until-idle", "--quiet", "--offline", *args])


def done_by(hive: Hive) -> dict[str, str]:
    """Each finished task's id → the agent that finished it."""
    out = {}
    for path in hive.done_dir.glob("*.md"):
        line = next(x for x in path.read_text().splitlines() if x.startswith("agent: "))
        out[path.stem] = line.removeprefix("agent: ")
    return out


def test_agents_runs_only_those_and_tasks_assigned_to_others_wait(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    write_task(hive, "for-ann", front="assignee: ann\n")
    write_task(hive, "for-bob", front="assignee: bob\n")
    write_task(hive, "for-anyone")

    result = run(hive, "--agents", "ann")

    assert result.exit_code == 3, result.output  # stalled: for-bob cannot move without bob
    assert "for-bob (assigned to bob, which is not running)" in " ".join(result.output.split())
    assert done_by(hive) == {"for-ann": "ann", "for-anyone": "ann"}
    assert (hive.tasks_dir / "for-bob.md").exists()
    assert not hive.audit_path("bob").exists()


def test_agents_naming_no_agent_is_one_line(hive: Hive) -> None:
    write_agent(hive, "ann")

    result = run(hive, "--agents", "ann,ghost")

    assert result.exit_code != 0
    assert "no such agent: ghost (agents: ann)" in result.output
    assert "Traceback" not in result.output
    assert not hive.audit_path("ann").exists()


def test_max_cycles_stops_after_that_many_cycles(hive: Hive) -> None:
    write_agent(hive, "ann")
    for i in range(8):  # two cycles' worth: an agent holds four tasks at a time
        write_task(hive, f"t{i}")

    result = run(hive, "--max-cycles", "1")

    assert result.exit_code == 3, result.output  # cut short: the next four are in hand
    assert "stopped: max-cycles" in result.output
    assert result.output.count("in hand: ann/") == 4
    assert len(done_by(hive)) == 4
    cycles = [x for x in hive.audit_path("ann").read_text().splitlines() if '"event": "cycle"' in x]
    assert len(cycles) == 1


def test_poll_sees_a_task_dropped_while_running(hive: Hive) -> None:
    write_agent(hive, "ann")
    config = fast_config(hive)
    config.daemon.rescan_interval = 600.0  # only the polling can see it in time
    daemon = Daemon(hive, config, CountingProvider(), RunOptions(poll=True))

    async def main() -> None:
        running = asyncio.create_task(daemon.run())
        await asyncio.sleep(0.3)
        write_task(hive, "late")
        for _ in range(200):
            await asyncio.sleep(0.05)
            if (hive.done_dir / "late.md").exists():
                break
        daemon.stop("test")
        await running

    asyncio.run(main())
    assert done_by(hive) == {"late": "ann"}


def test_until_idle_prints_a_summary_of_the_run(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_task(hive, "t1")
    write_task(hive, "t2")

    result = run(hive)

    assert result.exit_code == 0, result.output
    records = [json.loads(x) for x in hive.audit_path("ann").read_text().splitlines()]
    cycles = [r for r in records if r["event"] == "cycle"]
    usage = {k: sum(c["usage"][k] for c in cycles) for k in cycles[0]["usage"]}
    rows = {}
    for line in result.output.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) == 2:
            rows[cells[0]] = cells[1]
    assert rows["provider"] == "offline"
    assert rows["tasks done / failed"] == "2 / 0"
    assert rows["cycles"] == f"{len(cycles)} (0 with errors)"
    tokens_in = usage["input_tokens"] + usage["cache_write_tokens"] + usage["cache_read_tokens"]
    assert rows["tokens in / out"] == f"{tokens_in} / {usage['output_tokens']}"
    assert rows["cache hit share"] == f"{usage['cache_read_tokens'] / tokens_in:.0%}"
    assert rows["cost (estimate)"] == "$0 (offline provider: no model called)"


def test_the_stall_line_names_what_is_left_plainly() -> None:
    from hivemind.cli.run_summary import stall_text as _stall_text
    from hivemind.daemon.idle import IdleState

    waiting = [(f"t{i}", f"waits for [dep{i}]") for i in range(12)]
    text = _stall_text(IdleState(pending=12, active=1, unread={"bob": 2, "ann": 0}), waiting)
    assert text.plain == (
        "nothing more can happen without you: 12 pending, 1 active task(s), unread mail: "
        "bob 2; waiting: " + "; ".join(f"t{i} (waits for [dep{i}])" for i in range(10))
        + "; and 2 more"
    )
    quiet = _stall_text(IdleState(pending=1, unread={"bob": 0}), waiting[:1])
    assert quiet.plain.endswith("1 pending, 0 active task(s), no unread mail; waiting: "
                                "t0 (waits for [dep0])")


def test_the_stall_line_says_when_the_model_service_stayed_away() -> None:
    from hivemind.cli.run_summary import stall_text
    from hivemind.daemon.idle import IdleState

    text = stall_text(IdleState(active=1), [], reason="model-unavailable")
    assert text.plain == ("the model service is still away, given up waiting: 0 pending, "
                          "1 active task(s), no unread mail")


@pytest.mark.parametrize("names", [",", "", " , "], ids=["comma", "empty", "blank"])
def test_agents_naming_no_name_is_a_usage_error(hive: Hive, names: str) -> None:
    write_agent(hive, "ann")
    write_task(hive, "t1")

    result = run(hive, "--agents", names)

    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"error: --agents {names!r} names no agent")
    assert "(agents: ann)" in result.output and "Traceback" not in result.output
    assert (hive.tasks_dir / "t1.md").exists()
    assert not hive.audit_path("ann").exists()


def test_a_dir_and_a_different_hive_option_are_refused(hive: Hive, tmp_path: Path) -> None:
    write_agent(hive, "ann")
    other = Hive(tmp_path / "other").ensure()

    result = run(hive, "--hive", str(other.root))

    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: two hive folders given: ")
    assert "\n" not in result.output.strip()
    assert not hive.audit_path("ann").exists()


def test_run_json_prints_the_summary_alone_on_stdout(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_task(hive, "t1")
    write_task(hive, "for-bob", front="assignee: ann\ndepends_on: [missing]\n")

    result = run(hive, "--json")

    assert result.exit_code == 3, result.output  # stalled: for-bob waits for `missing`
    summary = json.loads(result.stdout)  # nothing else on stdout: the banner is on stderr
    assert summary["stopped_because"] == "stalled"
    assert (summary["provider"], summary["tasks_done"], summary["tasks_failed"]) == (
        "offline", 1, 0)
    assert summary["waiting"] == [{"task": "for-bob", "why": "waits for missing"}]
    assert summary["last_errors"] == {}
    assert "OFFLINE PROVIDER" in result.stderr


# -- the exit code and the summary say what happened ------------------------------------


def test_a_rejected_file_and_an_invalid_rom_make_exit_code_4_each_listed(hive: Hive) -> None:
    """A run that rejected a task file and found an invalid ROM exited 0."""
    write_agent(hive, "ann")
    write_agent(hive, "bob", front="max_steps: 0\n")  # invalid: bob never had a good config
    write_task(hive, "t1")
    (hive.tasks_dir / "bad.md").write_text("---\npriority: urgent\n---\n# Bad\n")

    result = run(hive, "--json")

    assert result.exit_code == 4, result.output
    summary = json.loads(result.stdout)
    assert (summary["stopped_because"], summary["exit_code"]) == ("idle", 4)
    assert summary["tasks_done"] == 1
    by_kind = {p["kind"]: p for p in summary["problems"]}
    assert set(by_kind) == {"rejected", "invalid ROM"}
    assert by_kind["rejected"]["name"] == "tasks/rejected/bad.md"
    assert "priority" in by_kind["rejected"]["reason"]
    assert by_kind["invalid ROM"]["name"] == "bob"
    assert "max_steps must be ≥ 1 (got 0)" in by_kind["invalid ROM"]["reason"]


def test_a_task_that_failed_makes_exit_code_4_with_its_reason(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run whose only task failed exited 0, as if all was well."""
    write_agent(hive, "ann")
    write_task(hive, "t1")
    write_task(hive, "t2")
    with FakeAnthropic() as api:
        def model(body: Any) -> Reply:
            tasks = scripted_model.active_tasks(body)
            if not scripted_model.is_first_round(body) or not tasks:
                return scripted_model.text_reply("over")
            calls = [scripted_model.tool_use(1, "complete_task", task_id="t1", result="ok"),
                     scripted_model.tool_use(2, "fail_task", task_id="t2",
                                             reason="the data for t2 is missing")]
            return Reply(body=message_body(calls, stop_reason="tool_use"))

        api.responder = model
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-cli-run-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
        result = CliRunner().invoke(app, ["run", str(hive.root), "--until-idle", "--quiet"])

    assert result.exit_code == 4, result.output
    assert "stopped: idle" in result.output
    assert "failed: t2: the data for t2 is missing" in " ".join(result.output.split())


def test_a_task_its_idle_turns_failed_makes_exit_code_4_with_the_ceiling_named(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that only talks: the follow-ups end its task in failed/, which the exit
    code and the summary count as a failure, with the ceiling and its last words."""
    write_agent(hive, "ann")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = lambda _body: scripted_model.text_reply("I think t1 comes to 42.")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-cli-run-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
        result = CliRunner().invoke(app, ["run", str(hive.root), "--until-idle", "--json"])

    assert result.exit_code == 4, result.output
    summary = json.loads(result.stdout)
    assert (summary["stopped_because"], summary["tasks_failed"]) == ("idle", 1)
    [problem] = summary["problems"]
    assert (problem["kind"], problem["name"]) == ("failed", "t1")
    assert "max_idle_turns=2" in problem["reason"]
    assert "I think t1 comes to 42." in problem["reason"]


def test_an_until_idle_run_cut_short_with_a_task_in_hand_is_no_success(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped by --max-cycles (or Ctrl-C) with t1 still claimed, the run said 0: "every
    task it touched ended in done/", which a script or a CI job took for success."""
    write_agent(hive, "ann")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = lambda _body: scripted_model.text_reply("Still thinking about t1.")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-cli-run-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
        result = CliRunner().invoke(
            app, ["run", str(hive.root), "--until-idle", "--max-cycles", "1", "--json"])

    assert result.exit_code == 3, result.output
    summary = json.loads(result.stdout)
    assert summary["stopped_because"] == "max-cycles"
    assert [(p["kind"], p["name"]) for p in summary["problems"]] == [("in hand", "ann/t1")]
    assert (hive.active_dir_for("ann") / "t1.md").is_file()
