"""File names that are not valid UTF-8 (`caf\\xe9.md`, from an old zip or another system).

Each one crashed every cycle of the agent that saw it (the audit record could not be
written), retried for ever, while the agent claimed and wedged the other tasks; one
in knowledge/ made every retry answer the same mail again.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hivemind.agent.audit import AuditLog
from hivemind.agent.record import CycleRecord, CycleStart
from hivemind.cli.app import app
from hivemind.fs.filenames import safe
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.quarantine import quarantine, rejected
from hivemind.hive.tasks.board import TaskBoard
from tests.helpers import run_until_idle, write_agent, write_task

NOT_UTF8 = b"caf\xe9"  # Latin-1 for `café`: not a UTF-8 sequence


def put(folder: Path, raw_name: bytes, data: bytes) -> Path:
    """Write a file whose name is the bytes `raw_name` (as a zip tool would)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = Path(os.fsdecode(os.fsencode(folder) + b"/" + raw_name))
    path.write_bytes(data)
    return path


def names(folder: Path) -> list[str]:
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def audit_lines(hive: Hive, agent: str) -> list[dict[str, Any]]:
    """Every line of the agent's audit file, which must be UTF-8 JSON throughout."""
    text = hive.audit_path(agent).read_bytes().decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    return result.output


# -- tasks ---------------------------------------------------------------------------


def test_a_task_whose_name_is_not_utf8_is_rejected_whole_under_a_valid_name(hive: Hive) -> None:
    data = b"# latin name\n\nDo it.\n"
    put(hive.tasks_dir, NOT_UTF8 + b".md", data)

    assert TaskBoard(hive, settle_time=0).scan_pending() == []

    assert names(hive.tasks_dir) == ["active", "done", "failed", "rejected"]
    [(kept, reason)] = rejected(hive)
    assert kept.name == "caf\ufffd.md" and kept.read_bytes() == data
    assert reason == "the file name is not valid UTF-8 (caf\\xe9.md); rename it"


def test_a_hive_with_such_a_task_goes_on_with_its_other_tasks(hive: Hive) -> None:
    write_agent(hive, "worker")
    put(hive.tasks_dir, NOT_UTF8 + b".md", b"# latin name\n")
    write_task(hive, "normal")

    daemon = run_until_idle(hive, timeout=20)

    assert daemon.exit_reason == "idle"
    assert names(hive.done_dir) == ["normal.md"]
    assert names(hive.active_dir_for("worker")) == []
    records = audit_lines(hive, "worker")
    assert [r["event"] for r in records] == ["cycle_start", "cycle"]
    assert records[1]["tasks"] == ["normal"] and records[1]["error"] is None


def test_such_a_task_left_in_active_by_an_older_version_is_rejected_not_resumed(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    put(hive.active_dir_for("worker"), NOT_UTF8 + b".md", b"# claimed long ago\n")

    daemon = run_until_idle(hive, timeout=20)

    assert daemon.exit_reason == "idle"
    assert names(hive.active_dir_for("worker")) == []
    assert [p.name for p, _ in rejected(hive)] == ["caf\ufffd.md"]


def test_a_file_rejected_for_another_reason_is_kept_under_a_valid_name_too(
    hive: Hive,
) -> None:
    path = put(hive.tasks_dir, NOT_UTF8 + b".md", b"\x00binary")

    quarantine(hive, path, "the file is not text")

    [(kept, reason)] = rejected(hive)
    assert kept.name == "caf\ufffd.md" and kept.read_bytes() == b"\x00binary"
    assert reason == ("the file is not text; also the file name is not valid UTF-8 "
                      "(caf\\xe9.md); rename it")


# -- mail and knowledge ----------------------------------------------------------------


def test_a_message_whose_name_is_not_utf8_is_read_under_a_valid_name(hive: Hive) -> None:
    box = Mailbox(hive, "bob").ensure()
    put(box.new_dir, b"m\xe9.md", b"---\nfrom: human\nsubject: hi\n---\nhello\n")

    [item] = box.unread()

    assert item.path.name == "m\ufffd.md" and item.message.id == "m\ufffd"
    assert (item.message.subject, item.message.body) == ("hi", "hello")
    box.mark_read(item)
    assert names(box.new_dir) == [] and names(box.cur_dir) == ["m\ufffd.md"]


def test_a_message_whose_long_extension_is_not_utf8_is_read_under_a_name_that_fits(
    hive: Hive,
) -> None:
    """Each bad byte becomes a three-byte `\ufffd`; only the stem was cut, so a long
    extension kept the name past 255 bytes: it was never renamed, nor read."""
    box = Mailbox(hive, "bob").ensure()
    put(box.new_dir, b"note." + b"\xe9" * 90, b"---\nfrom: human\nsubject: hi\n---\nhello\n")

    [item] = box.unread()

    assert item.path.name == "note." + "\ufffd" * 78  # 239 bytes: within the 240 asked
    assert (item.message.subject, item.message.body) == ("hi", "hello")
    box.mark_read(item)
    assert names(box.new_dir) == [] and names(box.cur_dir) == [item.path.name]


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        (b"x" * 240 + b"." + b"\xe9" * 10, "x" * 224 + "." + "\ufffd" * 10),
        (b"x" * 240 + b"." + b"\xe9" * 11, "x" * 240 + "." + "\ufffd" * 4),
    ],
    ids=["short-extension-kept", "long-extension-cut"],
)
def test_a_safe_name_fits_in_a_file_name(raw: bytes, kept: str) -> None:
    name = safe(os.fsdecode(raw))
    assert name == kept and len(os.fsencode(name)) <= 255


def test_an_agent_answers_such_a_message_once_and_marks_it_read(hive: Hive) -> None:
    write_agent(hive, "worker")
    box = Mailbox(hive, "worker").ensure()
    put(box.new_dir, b"m\xe9.md", b"---\nfrom: human\nsubject: hi\n---\nhello\n")

    daemon = run_until_idle(hive, timeout=20)

    assert daemon.exit_reason == "idle"
    assert names(box.new_dir) == [] and names(box.cur_dir) == ["m\ufffd.md"]
    assert len(Mailbox(hive, HUMAN).unread()) == 1
    assert [r["mail"] for r in audit_lines(hive, "worker")] == [["m\ufffd"], ["m\ufffd"]]


def test_a_note_whose_name_is_not_utf8_is_left_out_and_mail_is_answered_once(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    """Each cycle did its work and then failed to write its record, so its mail was
    never marked read: the same message was answered on every retry."""
    write_agent(hive, "worker")
    put(hive.knowledge_dir, b"k\xe9.md", b"# A note\n\nText.\n")
    (hive.knowledge_dir / "fine.md").write_text("# Fine\n")
    box = Mailbox(hive, "worker").ensure()
    (box.new_dir / "m.md").write_text("---\nfrom: human\nsubject: hi\n---\nhello\n")

    with caplog.at_level(logging.WARNING):
        daemon = run_until_idle(hive, timeout=20)

    assert daemon.exit_reason == "idle"
    assert names(box.new_dir) == [] and names(box.cur_dir) == ["m.md"]
    assert len(Mailbox(hive, HUMAN).unread()) == 1  # one reply, not one per retry
    [_, cycle] = audit_lines(hive, "worker")
    kept = [k["id"] for k in cycle["kept"]]
    assert "knowledge/fine.md" in kept and not any(k.startswith("knowledge/k") for k in kept)
    said = [r.getMessage() for r in caplog.records if "knowledge/k" in r.getMessage()]
    assert said == ["knowledge/k\\xe9.md: the file name is not valid UTF-8; it is not read "
                    "as knowledge until renamed"]


# -- the audit log's safety net ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "written"),
    [(os.fsdecode(b"caf\xe9.md"), "caf\\xe9.md"), ("half \ud83d pair", "half \ufffd pair")],
    ids=["undecodable-byte", "lone-surrogate"],
)
def test_a_lone_surrogate_in_a_record_is_written_escaped_not_failing(
    tmp_path: Path, text: str, written: str
) -> None:
    log = AuditLog(tmp_path / "a.jsonl", fsync=False)

    log.append(CycleStart(cycle=1, tasks=[text], mail=[], extra={text: text}))
    log.append(CycleRecord(cycle=1, text="after"))

    first, second = (json.loads(line) for line in log.path.read_text("utf-8").splitlines())
    assert first["tasks"] == [written] and first["extra"] == {written: written}
    assert second["text"] == "after"


# -- the commands people use -----------------------------------------------------------


def test_status_task_list_inspect_and_log_show_such_names_without_crashing(hive: Hive) -> None:
    write_agent(hive, "worker")
    for folder in (hive.tasks_dir, hive.done_dir, hive.failed_dir, hive.rejected_dir):
        put(folder, NOT_UTF8 + b".md", b"# odd\n")
    put(hive.active_dir_for("worker"), NOT_UTF8 + b".md", b"# odd\n")
    put(Mailbox(hive, "worker").new_dir, NOT_UTF8 + b".md", b"hello\n")
    put(hive.knowledge_dir, NOT_UTF8 + b".md", b"# odd\n")
    root = str(hive.root)

    status = json.loads(cli("status", root, "--json"))
    listed = json.loads(cli("task", "list", "--all", "--json", "--hive", root))
    cli("status", root)
    cli("task", "list", "--all", "--hive", root)
    cli("inspect", "worker", "--hive", root)
    run_until_idle(hive, timeout=20)
    log = cli("log", "worker", "--hive", root)

    assert [r["file"] for r in status["rejected"]] == ["tasks/rejected/caf\\xe9.md"]
    pending = [r for r in listed if r["state"] == "pending"]
    assert pending == [{**pending[0], "id": "caf\\xe9", "path": "tasks/caf\\xe9.md",
                        "problem": "the file name is not valid UTF-8 (caf\\xe9.md); rename it"}]
    assert "#1 end: " in log
