"""A person's edit to a task an agent holds is never lost: the task ends on the file as
its writer left it, and the model is shown the edit before the task may end."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from hivemind.hive.layout import Hive
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import run_until_idle, write_agent, write_task
from tests.scripted_model import is_first_round, last_results, text_reply, tool_use


def _completes_each_round(held: list[dict[str, Any]], delay: float,
                          on_first: Any) -> Any:
    """A model that ends t1 in every round until it is told it is done (the first
    round, `delay` s slow, runs `on_first` as it starts)."""
    def reply(body: Any) -> Reply:
        held.append(body)
        if is_first_round(body):
            on_first()
        elif any("is done" in r for r in last_results(body)):
            return text_reply("finished")
        call = tool_use(len(held), "complete_task", task_id="t1", result="Refund sent.")
        return Reply(body=message_body([call], stop_reason="tool_use"),
                     delay=delay if is_first_round(body) else 0.0)
    return reply


def test_a_slow_writer_during_the_model_call_keeps_its_second_part(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Refund order 42.")
    held = hive.active_dir_for("worker") / "t1.md"

    def slow_writer() -> None:  # { printf 'part1\n'; sleep 2; printf 'part2\n'; } > t1.md
        with held.open("w") as f:
            f.write("# t1\n\nRefund order 42.\n\nEDIT part1\n")
            f.flush()
            time.sleep(2.0)
            f.write("EDIT part2\n")

    requests: list[dict[str, Any]] = []
    writer = threading.Thread(target=slow_writer)
    with FakeAnthropic() as api:
        api.responder = _completes_each_round(requests, 0.8, writer.start)
        run_until_idle(hive, scripted_model.provider(api))
    writer.join()

    done = (hive.done_dir / "t1.md").read_text()
    assert "EDIT part1\nEDIT part2\n\n## Result\n\nRefund sent.\n" in done
    assert not held.exists()
    # The model was shown the finished edit before the task ended.
    assert any("EDIT part2" in r for body in requests for r in last_results(body))


def test_an_append_during_the_model_call_is_shown_to_the_model_before_the_end(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Refund order 42.")
    held = hive.active_dir_for("worker") / "t1.md"

    def append() -> None:  # >> tasks/active/worker/t1.md, while the model thinks
        with held.open("a") as f:
            f.write("\nALSO: refund the shipping.\n")

    requests: list[dict[str, Any]] = []
    with FakeAnthropic() as api:
        api.responder = _completes_each_round(requests, 0.3, append)
        run_until_idle(hive, scripted_model.provider(api))

    # The call refused to end the edited task, then the one told of the edit (which ends
    # it: the last task ended, no closing call follows).
    [_, told] = requests
    [result] = last_results(told)
    assert "was edited while you worked on it" in result
    assert "ALSO: refund the shipping." in result
    done = (hive.done_dir / "t1.md").read_text()
    assert "ALSO: refund the shipping.\n\n## Result\n\nRefund sent.\n" in done


def test_an_edit_during_a_call_that_ends_in_text_wakes_the_agent_again(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1", "Refund order 42.")
    held = hive.active_dir_for("worker") / "t1.md"
    requests: list[dict[str, Any]] = []

    def model(body: Any) -> Reply:
        requests.append(body)
        tasks = json.dumps(scripted_model.context_entries(body))
        if "ALSO" not in tasks:  # the first look: an edit comes while it thinks
            with held.open("a") as f:
                f.write("\nALSO: refund the shipping.\n")
            return Reply(body=message_body([{"type": "text", "text": "Looking into it."}]),
                         delay=0.3)
        if is_first_round(body):
            call = tool_use(9, "complete_task", task_id="t1", result="Both refunded.")
            return Reply(body=message_body([call], stop_reason="tool_use"))
        return text_reply("finished")

    with FakeAnthropic() as api:
        api.responder = model
        run_until_idle(hive, scripted_model.provider(api))

    firsts = [b for b in requests if is_first_round(b)]
    assert len(firsts) == 2  # woken again after the call, by the edit alone
    assert "ALSO: refund the shipping." in json.dumps(scripted_model.context_entries(firsts[1]))
    assert "Both refunded." in (hive.done_dir / "t1.md").read_text()
