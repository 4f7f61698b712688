"""An audit file of any size, or with any line, is read bounded in memory and time."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hivemind.agent.audit import AuditLog
from hivemind.agent.auditfile import AUDIT_TAIL_BYTES, MAX_RECORD_BYTES
from hivemind.agent.audittail import Position, read_new
from hivemind.hive.layout import Hive
from tests.helpers import write_agent

HUGE = 6 * 2**30  # sparse: costs no disk
MEMORY_LIMIT = 1 * 2**30  # far less than the file: a reader that loads it dies
REPO = Path(__file__).resolve().parent.parent


def line_of(**record: Any) -> bytes:
    return (json.dumps(record) + "\n").encode()


def huge_file(path: Path, *tail_lines: bytes) -> None:
    """A 6 GB sparse file of one line without a newline, then `tail_lines`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb"):
        pass
    os.truncate(path, HUGE)
    with open(path, "ab") as fh:
        fh.write(b"\n" + b"".join(tail_lines))


def run_limited(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a Python whose address space is capped at `MEMORY_LIMIT`."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False,
                          cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, preexec_fn=cap)


def bytes_read() -> int:
    with open("/proc/self/io", encoding="ascii") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_a_6gb_audit_file_is_recovered_from_its_tail_in_little_memory(tmp_path: Path) -> None:
    path = tmp_path / "assistant.jsonl"
    huge_file(path, line_of(event="cycle_start", cycle=7, at="2026-01-01T00:00:00+00:00"))
    result = run_limited(f"""
        import json
        from pathlib import Path
        from hivemind.agent.audit import AuditLog
        def rchar():
            return int(next(l for l in open("/proc/self/io") if l.startswith("rchar:")).split()[1])
        before = rchar()
        log = AuditLog(Path({str(path)!r}), fsync=False)
        print(json.dumps([log.mark_interrupted(), log.last_cycle, rchar() - before]))
        """, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    interrupted, last_cycle, read = json.loads(result.stdout)
    assert (interrupted, last_cycle) == ([7], 7)
    assert read <= AUDIT_TAIL_BYTES + 2**20
    with open(path, "rb") as fh:
        fh.seek(-500, os.SEEK_END)
        assert json.loads(fh.read().splitlines()[-1])["event"] == "interrupted"


def test_an_over_long_line_is_skipped_once_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(line_of(event="reflection", cycle=1)
                     + b'{"event": "cycle", "pad": "' + b"x" * MAX_RECORD_BYTES + b'"}\n'
                     + line_of(event="reflection", cycle=2))
    log = AuditLog(path, fsync=False)
    before = bytes_read()
    assert [r.cycle for r in log.records()] == [1, 2]
    assert bytes_read() - before < 3 * MAX_RECORD_BYTES
    assert [r.cycle for r in log.records()] == [1, 2]
    told = [r.getMessage() for r in caplog.records if "skipped a line" in r.getMessage()]
    assert told == [f"{path}: skipped a line over {MAX_RECORD_BYTES} bytes"]


def test_only_the_tail_of_a_long_audit_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    old = line_of(event="reflection", cycle=1, pad="y" * 1000)
    with open(path, "wb") as fh:
        for _ in range(AUDIT_TAIL_BYTES // len(old) + 1000):
            fh.write(old)
        fh.write(line_of(event="reflection", cycle=2))
    cycles = [r.cycle for r in AuditLog(path, fsync=False).records()]
    assert cycles[-1] == 2
    assert len(cycles) < AUDIT_TAIL_BYTES // len(old) + 2  # the head was never read


def test_hivemind_log_on_a_6gb_audit_file_shows_its_last_records(
    hive: Hive, tmp_path: Path
) -> None:
    agent, root = "scribe", hive.root
    write_agent(hive, agent)
    huge_file(hive.audit_path(agent),
              line_of(event="reflection", cycle=41), line_of(event="reflection", cycle=42))
    result = run_limited(f"""
        import sys
        from hivemind.cli.app import main
        sys.argv = ["hivemind", "log", {agent!r}, "--hive", {str(root)!r}, "--json"]
        main()
        """, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [json.loads(line)["cycle"] for line in result.stdout.splitlines()] == [41, 42]


def test_following_skips_an_over_long_line_written_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(line_of(event="reflection", cycle=1) + b"z" * (MAX_RECORD_BYTES + 10))
    read = read_new(path, Position())
    assert [r.cycle for r in read.records] == [1] and read.at.skipping
    with open(path, "ab") as fh:
        fh.write(b"z" * 2**20 + b"\n" + line_of(event="reflection", cycle=2))
    read = read_new(path, read.at)
    assert [r.cycle for r in read.records] == [2]
    assert read.at == Position(read.at.inode, path.stat().st_size, False)
