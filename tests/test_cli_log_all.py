"""`hivemind log` over every agent: interleaved by time, narrowed with AGENT or --agent,
`--since`, `-f` following every agent's log (one that starts meanwhile too), and the
last records of a huge log read from its end."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner, Result

from hivemind.agent.audittail import read_last
from hivemind.cli import log_cmd
from hivemind.cli.log_cmd import parse_since
from hivemind.hive.layout import Hive
from tests.helpers import write_agent

ROOT = Path(__file__).resolve().parent.parent
WAIT = 30.0
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def app() -> typer.Typer:
    cli = typer.Typer(add_completion=False)

    @cli.callback()
    def root() -> None:
        """hivemind"""

    log_cmd.register(cli)
    return cli


def log(app: typer.Typer, hive: Hive, *args: str) -> Result:
    result = CliRunner().invoke(app, ["log", *args, "--hive", str(hive.root)])
    assert "Traceback" not in result.output
    return result


def write(hive: Hive, agent: str, *records: dict[str, Any]) -> None:
    path = hive.audit_path(agent)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")


def said(minutes_ago: float, text: str, cycle: int = 1) -> dict[str, Any]:
    at = (NOW - timedelta(minutes=minutes_ago)).isoformat()
    return {"event": "cycle", "at": at, "cycle": cycle, "tasks": ["t1"], "text": text}


@pytest.fixture
def two(hive: Hive) -> Hive:
    """ann and bob, whose cycles alternate in time (ann at 50, 30, 10 minutes ago)."""
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    write(hive, "ann", said(50, "ann one"), said(30, "ann two", 2), said(10, "ann three", 3))
    write(hive, "bob", said(40, "bob one"), said(20, "bob two", 2))
    return hive


def texts(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [line.split(" said ", 1)[1] for line in result.output.splitlines() if " said " in line]


def test_every_agent_is_interleaved_by_time(app: typer.Typer, two: Hive) -> None:
    assert texts(log(app, two)) == ["ann one", "bob one", "ann two", "bob two", "ann three"]
    first = log(app, two).output.splitlines()[0].split()
    assert first[1:3] == ["ann", "t1"]


def test_n_counts_the_newest_records_of_all_agents(app: typer.Typer, two: Hive) -> None:
    assert texts(log(app, two, "-n", "2")) == ["bob two", "ann three"]


@pytest.mark.parametrize("args", [["bob"], ["--agent", "bob"]], ids=["argument", "option"])
def test_an_agent_named_narrows_the_log_to_it(
    app: typer.Typer, two: Hive, args: list[str]
) -> None:
    assert texts(log(app, two, *args)) == ["bob one", "bob two"]


def test_agents_named_twice_or_both_ways_are_read_once(app: typer.Typer, two: Hive) -> None:
    out = texts(log(app, two, "ann", "--agent", "bob", "--agent", "ann"))
    assert out == ["ann one", "bob one", "ann two", "bob two", "ann three"]


def test_an_unknown_agent_among_several_is_one_line(app: typer.Typer, two: Hive) -> None:
    result = log(app, two, "--agent", "bob", "--agent", "zed")
    assert result.exit_code == 1
    assert result.output.strip().startswith("error: no agent 'zed'")
    assert "\n" not in result.output.strip()


@pytest.mark.parametrize(("since", "expected"), [
    pytest.param("25m", ["bob two", "ann three"], id="minutes"),
    pytest.param("1h", ["ann one", "bob one", "ann two", "bob two", "ann three"], id="hour"),
    pytest.param("35 min", ["ann two", "bob two", "ann three"], id="spaced"),
])
def test_since_an_age_shows_only_what_happened_since(
    app: typer.Typer, two: Hive, since: str, expected: list[str]
) -> None:
    assert texts(log(app, two, "--since", since)) == expected


def test_since_is_not_cut_to_the_default_50(app: typer.Typer, hive: Hive) -> None:
    write_agent(hive, "ann")
    write(hive, "ann", *(said(1, f"n{i}", i) for i in range(80)))
    assert len(texts(log(app, hive, "--since", "1h"))) == 80
    assert len(texts(log(app, hive))) == 50
    assert len(texts(log(app, hive, "--since", "1h", "-n", "5"))) == 5


def test_since_a_time_of_day_or_a_date(app: typer.Typer, two: Hive) -> None:
    when = (NOW - timedelta(minutes=25)).astimezone()
    if when.date() == datetime.now().astimezone().date():
        assert texts(log(app, two, "--since", when.strftime("%H:%M:%S"))) == [
            "bob two", "ann three"]
    assert texts(log(app, two, "--since", when.isoformat())) == ["bob two", "ann three"]
    tomorrow = (datetime.now().astimezone() + timedelta(days=1)).date().isoformat()
    result = log(app, two, "--since", tomorrow)
    assert result.output.strip() == f"no audit records since {tomorrow} (.hivemind/audit/)"


@pytest.mark.parametrize("bad", ["yesterday", "10x", "25:99", ""])
def test_a_since_that_is_no_time_is_one_line_exit_2(
    app: typer.Typer, two: Hive, bad: str
) -> None:
    result = log(app, two, "--since", bad)
    assert result.exit_code == 2, result.output
    text = result.output.strip()
    assert text.startswith(f"error: --since {bad!r}: not an age or a time") and "\n" not in text


def test_parse_since_reads_ages_and_times() -> None:
    now = datetime(2026, 11, 26, 15, 0, tzinfo=UTC)
    assert parse_since("10m", now) == now - timedelta(minutes=10)
    assert parse_since("2h", now) == now - timedelta(hours=2)
    assert parse_since("3d", now) == now - timedelta(days=3)
    assert parse_since("30s", now) == now - timedelta(seconds=30)
    assert parse_since("2026-11-26T14:30+00:00", now) == now - timedelta(minutes=30)


def test_no_agent_has_run_yet(app: typer.Typer, hive: Hive) -> None:
    write_agent(hive, "ann")
    assert log(app, hive).output.strip() == "no audit records yet (.hivemind/audit/)"


def test_an_agent_since_removed_is_still_in_the_log_of_all(app: typer.Typer, two: Hive) -> None:
    write(two, "gone", said(5, "last words"))
    assert texts(log(app, two))[-1] == "last words"


def test_the_last_records_of_a_long_log_are_read_from_its_end(tmp_path: Path) -> None:
    """A log of 40 MB: `-n 5` reads a few kilobytes of it, not the file."""
    path = tmp_path / "a.jsonl"
    line = json.dumps(said(60, "x" * 900)).encode() + b"\n"
    with open(path, "wb") as fh:
        fh.write(line * (40 * 2**20 // len(line)))
        fh.write(json.dumps(said(1, "the newest")).encode() + b"\n")

    def rchar() -> int:
        with open("/proc/self/io", encoding="ascii") as f:
            return int(next(x for x in f if x.startswith("rchar:")).split()[1])

    before = rchar()
    read = read_last(path, 5)
    assert rchar() - before < 2**20
    assert [getattr(r, "text", None) for r in read.records][-1] == "the newest"
    assert len(read.records) == 5
    assert read.at.offset == path.stat().st_size
    since = read_last(path, None, NOW - timedelta(minutes=30))
    assert [getattr(r, "text", None) for r in since.records] == ["the newest"]


def test_follow_prints_every_agent_one_that_starts_meanwhile_too(two: Hive) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "200"
    proc = subprocess.Popen(
        [sys.executable, "-m", "hivemind", "log", "-f", "-n", "1", "--hive", str(two.root)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    lines: queue.Queue[bytes] = queue.Queue()

    def read_lines() -> None:
        for line in proc.stdout or ():
            lines.put(line)

    threading.Thread(target=read_lines, daemon=True).start()

    def next_line() -> str:
        try:
            return lines.get(timeout=WAIT).decode()
        except queue.Empty:
            proc.kill()
            raise AssertionError(f"nothing printed in {WAIT} s") from None

    try:
        assert "said ann three" in next_line()  # the last one so far: it follows from here
        assert "#3 end: " in next_line()
        write(two, "bob", said(0, "bob again", 3))
        line = next_line()
        assert line.split()[1] == "bob" and "said bob again" in line
        assert "#3 end: " in next_line()
        write_agent(two, "cid")
        write(two, "cid", said(0, "cid is here"))
        line = next_line()
        assert line.split()[1] == "cid" and "said cid is here" in line
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=WAIT)
        err = proc.stderr.read() if proc.stderr else b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err.decode()


def test_a_fifo_or_a_link_in_the_audit_folder_is_not_read(
    app: typer.Typer, two: Hive, tmp_path: Path
) -> None:
    """A hive is someone else's folder: a FIFO would block the reader for ever, a link
    would read a file from outside the hive."""
    os.mkfifo(two.audit_path("fifo"))
    outside = tmp_path / "secret.jsonl"
    outside.write_text(json.dumps(said(1, "outside the hive")) + "\n")
    two.audit_path("linked").symlink_to(outside)
    assert texts(log(app, two)) == ["ann one", "bob one", "ann two", "bob two", "ann three"]
    assert log(app, two, "linked").output.startswith("no audit records for linked yet")
