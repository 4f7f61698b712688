"""The line `hivemind run --until-idle` prints per cycle says its counts in plain English."""

from __future__ import annotations

import pytest
from rich.text import Text

from hivemind.agent.report import CycleReport
from hivemind.cli.run_feed import cycle_text
from hivemind.llm.base import Usage


@pytest.mark.parametrize(
    ("calls", "done", "sent", "failed", "said"),
    [
        pytest.param(1, 1, 1, 0, "lead #1  1 tool call  1 task done  1 message sent", id="one"),
        pytest.param(3, 2, 2, 2, "lead #1  3 tool calls  2 tasks done  2 messages sent  "
                     "2 tasks failed", id="several"),
        pytest.param(0, 0, 0, 1, "lead #1  0 tool calls  1 task failed", id="none"),
    ],
)
def test_a_cycle_line_says_one_and_several_as_english_does(
    calls: int, done: int, sent: int, failed: int, said: str
) -> None:
    report = CycleReport(agent="lead", cycle=1, ran=True, tool_calls=calls, tasks_done=done,
                         messages_sent=sent, tasks_failed=failed,
                         usage=Usage(input_tokens=100, output_tokens=20))
    assert Text.from_markup(cycle_text(report)).plain == f"{said}  120 tokens"
