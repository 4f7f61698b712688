"""The audit log redacts secrets wherever they hide in a record, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivemind.agent.audit import AuditLog
from hivemind.agent.record import CycleRecord


def last_line(path: Path) -> str:
    return path.read_text(encoding="utf-8").splitlines()[-1]


@pytest.mark.parametrize(
    "secret",
    ["sk-plain-123", 'sk-"quoted"\\back', "sk-new\nline", "sk-ünïcode-✓"],
    ids=["plain", "json-escaped-chars", "newline", "non-ascii"],
)
def test_a_known_secret_is_redacted_wherever_it_is(tmp_path: Path, secret: str) -> None:
    log = AuditLog(tmp_path / "a.jsonl", secrets=(secret,), fsync=False)
    log.append(CycleRecord(text=f"the key is {secret}!",
               tool_calls=[{"input": {"body": f"x{secret}x"}}]))
    line = last_line(log.path)
    rec = json.loads(line)
    assert secret not in line and json.dumps(secret)[1:-1] not in line
    assert rec["text"] == "the key is [redacted]!"
    assert rec["tool_calls"][0]["input"]["body"] == "x[redacted]x"


def test_secret_looking_keys_are_redacted_in_any_case(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl", fsync=False)
    log.append(CycleRecord(request={"headers": {"X-Api-Key": "abc", "Authorization": "Bearer z"}},
               api_key="k"))
    rec = json.loads(last_line(log.path))
    assert rec["api_key"] == "[redacted]"
    assert rec["request"]["headers"] == {"X-Api-Key": "[redacted]", "Authorization": "[redacted]"}


def test_a_record_without_secrets_is_written_as_given(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl", secrets=("sk-never-there",), fsync=False)
    record = log.append(CycleRecord(cycle=3, text="api_key is a word here, not a key",
                        kept=[{"id": "task:t1", "tokens": 12}], path=tmp_path))
    rec = json.loads(last_line(log.path))
    assert rec["text"] == "api_key is a word here, not a key"
    assert rec["kept"] == [{"id": "task:t1", "tokens": 12}]
    assert rec["path"] == str(tmp_path)
    assert rec["at"] == record.at


def test_lines_that_are_no_record_are_skipped_not_fatal(tmp_path: Path) -> None:
    # A torn line, a stray value someone appended, a blank: none of them is a record,
    # and reading the trail (at a restart: mark_interrupted) must not stop on them.
    path = tmp_path / "worker.jsonl"
    path.write_text(
        '{"event": "cycle_start", "cycle": 1, "at": "2026-01-01T00:00:00+00:00"}\n'
        "5\n[1, 2]\n\n\"text\"\n"
        '{"event": "cycle", "cycle": 1, "at": "2026-01-01T00:00:01+00:00"}\n'
        '{"event": "cycle_start", "cycle": 2, "at": "2026-01-01T00:00:02+00:00"}\n'
        '{"event": "cyc'
    )
    audit = AuditLog(path, fsync=False)
    assert [(r.event, r.cycle) for r in audit.records()] == [
        ("cycle_start", 1), ("cycle", 1), ("cycle_start", 2)
    ]
    assert audit.mark_interrupted() == [2]
