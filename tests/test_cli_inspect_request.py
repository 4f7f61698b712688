"""`hivemind inspect AGENT --request`: the very request the agent's next cycle sends;
`inspect` says why each kept block was kept and which notes the filter left out."""

from __future__ import annotations

import json
import re
from typing import Any

from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import Hive
from hivemind.hive.tasks.board import TaskBoard
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import task_completer


def _timeless(context: str) -> str:
    return re.sub(r'"timestamp":"[^"]*"', '"timestamp":"…"', context)


def inspect(hive: Hive, *args: str) -> Any:
    return CliRunner().invoke(app, ["inspect", *args, "--hive", str(hive.root)])


def test_the_request_shown_is_the_one_the_cycle_sends(hive: Hive) -> None:
    write_agent(hive, "worker", front="model: claude-test-1\ntools: [complete_task, "
                "fail_task, read_file]\n")
    (hive.knowledge_dir / "refunds.md").write_text("# Refunds\n\nWithin 30 days.\n")
    write_task(hive, "t1", "Refund order 42.")
    board = TaskBoard(hive, settle_time=0)
    [ref] = board.scan_pending()
    board.claim(ref, "worker")  # held: its next cycle sees what inspect sees

    shown = inspect(hive, "worker", "--request", "--json")
    assert shown.exit_code == 0, shown.output
    request = json.loads(shown.output)

    sent: list[dict[str, Any]] = []

    def model(body: Any) -> Reply:
        sent.append(body)
        return task_completer(body)

    with FakeAnthropic() as api:
        api.responder = model
        run_until_idle(hive, scripted_model.provider(api))

    first = sent[0]
    assert request["model"] == first["model"] == "claude-test-1"
    assert request["max_output_tokens"] == first["max_tokens"]
    assert request["system"] == "".join(block["text"] for block in first["system"])
    assert request["tools"] == [tool["name"] for tool in first["tools"]] == [
        "read_file", "complete_task", "fail_task"]
    context = "".join(b["text"] for b in first["messages"][0]["content"])
    assert _timeless(request["context"]) == _timeless(context)  # stamped when built
    assert "Refund order 42." in request["context"]


def test_the_request_in_text_names_its_parts(hive: Hive) -> None:
    write_agent(hive, "worker", body="You are worker. Refund what you are asked to.\n")
    write_task(hive, "t1", "Refund order 42.")

    result = inspect(hive, "worker", "--request")

    assert result.exit_code == 0, result.output
    out = result.output
    assert "request of worker: model claude-sonnet-5-5" in out
    assert "You are worker. Refund what you are asked to." in out  # the ROM, in the system
    assert "complete_task" in out and "Refund order 42." in out
    assert "1 pending task(s) shown as this agent would get them" in out


def test_the_request_of_an_unknown_agent_is_one_line(hive: Hive) -> None:
    write_agent(hive, "worker")

    result = inspect(hive, "nobody", "--request")

    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: no agent named 'nobody' in {hive.root}; agents: worker"]


def test_each_kept_block_says_its_tier_score_and_the_budget_used(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Refund order 42.")

    result = inspect(hive, "worker", "--json", "--budget", "5000")

    assert result.exit_code == 0, result.output
    rows = [row for row in json.loads(result.output)["blocks"] if row["kept"]]
    kept = {row["id"]: row["reason"] for row in rows}
    rom = next(row for row in rows if row["id"] == "rom:worker")
    assert kept["rom:worker"] == (f"critical, always kept; {rom['estimated']:,}/5,000 tokens "
                                  f"({100 * rom['estimated'] / 5000:.1f} %)")
    assert kept["task:t1"].startswith("high, score ")
    assert kept["task:t1"].endswith(" ≤ 80 %")
    used = 0  # the budget used grows block by block, in the order they were kept
    for row in rows:
        used += row["estimated"]
        assert f"; {used:,}/5,000 tokens" in row["reason"], row


def test_notes_left_out_by_the_knowledge_filter_are_listed_with_why(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Fix the billing export.")
    board = TaskBoard(hive, settle_time=0)
    board.claim(board.scan_pending()[0], "worker")  # notes follow the tasks it holds
    (hive.knowledge_dir / "billing.md").write_text("# Billing export\n\n" + "csv " * 300)
    for topic in ("gardening", "cooking", "sailing"):
        (hive.knowledge_dir / f"{topic}.md").write_text(f"# {topic.title()}\n\n" + "x " * 600)

    shown = inspect(hive, "worker", "--json", "--budget", "2000")
    text = inspect(hive, "worker", "--budget", "2000")

    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.output)
    left_out = {n["id"]: n["reason"] for n in report["notes_left_out"]}
    assert sorted(left_out) == ["knowledge/cooking.md", "knowledge/gardening.md",
                                "knowledge/sailing.md"]
    assert set(left_out.values()) == {
        "shares no word with the work at hand (its tasks; holding none, its unread mail)"}
    assert "knowledge/billing.md" in {row["id"] for row in report["blocks"]}
    assert "knowledge notes left out by the filter (3;" in text.output
