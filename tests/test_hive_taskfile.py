"""A task file as it ends: the runtime's fields set line by line, the rest kept."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from hivemind.hive.frontmatter import task_from_text
from hivemind.hive.models import TaskState
from hivemind.hive.tasks.file import ended_text

WHEN = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
FIELDS = ("status", "agent", "finished_at")


def done(text: str) -> str:
    path = Path("/hive/tasks/active/ann/job.md")
    task = task_from_text(text, path)
    task = task.model_copy(update={"status": TaskState.DONE, "agent": "ann",
                                   "finished_at": WHEN,
                                   "body": task.body.rstrip("\n") + "\n\n## Result\n\nok"
                                   if task.body.strip() else "## Result\n\nok"})
    return ended_text(text, path, task, FIELDS, "Result", "ok")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("# Job\n\nDo it.\n",
         "---\nstatus: done\nagent: ann\nfinished_at: 2026-11-26T12:00:00+00:00\nid: job\n"
         "title: Job\n---\n# Job\n\nDo it.\n\n## Result\n\nok\n"),
        ("---\n# keep me\nstatus: active  # was claimed\npriority: medium\n---\nDo it.\n",
         "---\n# keep me\nstatus: done\npriority: medium\nagent: ann\n"
         "finished_at: 2026-11-26T12:00:00+00:00\nid: job\ntitle: job\n---\nDo it.\n\n"
         "## Result\n\nok\n"),
        ("---\nid: 42\n---\nDo it.\n",
         "---\nid: 42\nstatus: done\nagent: ann\nfinished_at: 2026-11-26T12:00:00+00:00\n"
         'title: "42"\n---\nDo it.\n\n## Result\n\nok\n'),
        ("---\r\nid: job\r\nagent: |\r\n  someone\r\n---\r\nDo it.\r\n",
         "---\r\nid: job\r\nagent: ann\nstatus: done\nfinished_at: 2026-11-26T12:00:00+00:00\n"
         "title: job\n---\r\nDo it.\r\n\n## Result\n\nok\n"),
    ],
    ids=["no-front-matter", "comments-and-defaults", "a-numeric-id", "crlf-and-block-value"],
)
def test_only_the_runtime_fields_change(given: str, expected: str) -> None:
    assert done(given) == expected
