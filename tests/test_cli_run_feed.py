"""What `hivemind run` prints while it runs (one line an event), and its summary (cost
per agent, where the results are)."""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from hivemind.agent.report import CycleReport, FailureKind
from hivemind.cli.app import app
from hivemind.cli.run_feed import RunFeed
from hivemind.hive.layout import Hive
from hivemind.llm.base import Usage
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic
from tests.helpers import write_agent, write_task

ROOT = Path(__file__).resolve().parent.parent
WAIT = 60.0


def away(agent: str) -> CycleReport:
    return CycleReport(agent=agent, ran=True, retry=True, model_failure=FailureKind.TRANSIENT,
                       error="ModelRateLimitError: 529 Overloaded")


def fine(agent: str, cost: float = 0.01) -> CycleReport:
    return CycleReport(agent=agent, ran=True, cost=cost,
                       usage=Usage(input_tokens=100, output_tokens=20))


def feed_lines(hive: Hive, reports: list[CycleReport]) -> tuple[list[str], RunFeed]:
    out = io.StringIO()
    feed = RunFeed(hive, Console(file=out, width=300), events=True, cycles=True)
    for report in reports:
        feed.on_cycle(report)
    return [line[9:] for line in out.getvalue().splitlines()], feed  # past the time


def test_a_model_service_away_is_one_line_and_back_is_one_line(hive: Hive) -> None:
    lines, feed = feed_lines(hive, [away("ann"), away("bob"), away("ann"), away("ann"),
                                    fine("bob"), away("ann"), fine("ann"), fine("ann")])
    assert lines == [
        "model service away (ann: ModelRateLimitError: 529 Overloaded); the agents try again "
        "with a back-off, quietly, and say when it is back",
        "model service back after 0 s",
    ]
    assert (feed.spend["ann"].cycles, feed.spend["ann"].tokens) == (6, 240)
    assert feed.spend["bob"].cost == pytest.approx(0.01)


def test_an_error_that_is_not_the_service_away_is_one_line(hive: Hive) -> None:
    report = CycleReport(agent="ann", ran=True, error="ModelRequestError: 400 prompt too long",
                         model_failure=FailureKind.REQUEST)
    lines, _ = feed_lines(hive, [report])
    assert lines == ["ann error: ModelRequestError: 400 prompt too long"]


def test_a_run_kept_running_prints_start_up_tasks_taken_and_ended_and_the_outage(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tried with a key: it printed nothing at start-up, and a cycle line named no task."""
    write_agent(hive, "ann")
    write_task(hive, "t1", front="title: Summarise the notes\n")
    hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
    with FakeAnthropic() as api:
        api.reply_error(529, "overloaded_error", "Overloaded", times=2)
        api.responder = lambda body: scripted_model.task_completer(body, "12 notes, 3 themes")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update(ANTHROPIC_API_KEY="sk-ant-feed-test", ANTHROPIC_BASE_URL=api.base_url,
                   COLUMNS="250", PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""))
        proc = subprocess.Popen([sys.executable, "-m", "hivemind", "run", str(hive.root)],
                                env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()],
                                  daemon=True)
        reader.start()
        seen: list[str] = []
        try:
            while not any(" done t1 " in x for x in seen):
                try:
                    seen.append(lines.get(timeout=WAIT).rstrip("\n"))
                except queue.Empty:
                    raise AssertionError(f"no 'done t1' in {WAIT} s: {seen}") from None
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=WAIT)
            reader.join(WAIT)  # the rest of stdout, to its end: the summary
            out = "".join(lines.get() for _ in range(lines.qsize()))
            err = proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = "\n".join(seen) + "\n" + out
    assert "Traceback" not in err, err
    assert seen[0] == ("started: 1 agent (ann), provider anthropic, model claude-sonnet-5-5; "
                       "1 task waiting. Ctrl-C stops.")
    events = [x[9:] for x in seen[1:]]
    assert events[0] == 'ann took t1 "Summarise the notes"'
    assert events[1].startswith("model service away (ann: ModelRateLimitError: ")
    assert events[2].startswith("model service back after ")
    assert events[3:] == ['ann done t1 "Summarise the notes": 12 notes, 3 themes']
    assert text.count("model service away") == 1 and text.count("model service back") == 1
    assert "│   ann " in out and "$0.0" in out.split("│   ann ", 1)[1].split("\n")[0]
    assert "results: 1 task done in tasks/done/; what the agents wrote in workspace/" in out


def test_the_until_idle_summary_has_each_agent_and_where_the_results_are(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    write_task(hive, "t1", front="assignee: ann\n")
    write_task(hive, "t2", front="assignee: bob\n")
    hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
    result = CliRunner().invoke(app, ["run", str(hive.root), "--until-idle", "--quiet",
                                      "--offline"], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = {cells[0]: cells[1] for line in result.output.splitlines()
            if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 2}
    assert rows["ann"].startswith("1 cycle, ") and rows["ann"].endswith(" tokens")
    assert rows["bob"].startswith("1 cycle, ")
    unread = len(list((hive.mailbox_dir("human") / "new").glob("*.md")))
    assert unread > 0
    assert " ".join(result.output.split()).endswith(
        f"results: 2 tasks done in tasks/done/; what the agents wrote in workspace/; {unread} "
        f"unread message{'s' if unread > 1 else ''} for you in mailboxes/human/new/ "
        "(hivemind inbox)")
    summary = json.loads(CliRunner().invoke(app, [
        "run", str(hive.root), "--until-idle", "--offline", "--json"]).stdout)
    assert set(summary["agents"]) <= {"ann", "bob"}
    assert summary["results"]["done"] == str(hive.done_dir)


def test_the_runtimes_notices_are_feed_lines_with_a_time(hive: Hive) -> None:
    out = io.StringIO()
    with RunFeed(hive, Console(file=out, width=300), events=True, cycles=True):
        logging.getLogger("hivemind.daemon.outage").warning("%s is paused: %s", "ann", "401")
    logging.getLogger("hivemind.daemon.outage").warning("after the run: not the feed's")
    [line] = out.getvalue().splitlines()
    assert re.fullmatch(r"\d\d:\d\d:\d\d ann is paused: 401", line), line


def test_a_notice_quoting_a_hive_shows_its_escape_sequences_harmless(hive: Hive) -> None:
    out = io.StringIO()
    with RunFeed(hive, Console(file=out, width=300, force_terminal=True), events=True,
                 cycles=True):
        logging.getLogger("hivemind.hive.rom").warning("tools: %s left out", "x\x1b[2Jy")
    assert "\x1b[2J" not in out.getvalue() and "x\ufffd[2Jy" in out.getvalue()


def test_a_scratch_runs_summary_points_at_the_scratch_copy(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The results are in the copy: the paths and the inbox command say where."""
    write_agent(hive, "ann")
    write_task(hive, "t1")
    hive.config_file.write_text("[daemon]\nsettle_time = 0.0\n")
    monkeypatch.chdir(hive.root)
    result = CliRunner().invoke(app, ["run", "--until-idle", "--quiet", "--offline", "--scratch"],
                                terminal_width=300)
    assert result.exit_code == 0, result.output
    line = " ".join(result.output.split()).split("results: ", 1)[1]
    assert line.startswith("1 task done in .hivemind/scratch/tasks/done/;")
    assert line.endswith("(hivemind inbox --hive .hivemind/scratch)")
    assert not list(hive.done_dir.glob("*.md"))  # the hive itself is untouched
