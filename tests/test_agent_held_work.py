"""Held work with a model that has real habits (tests.model_habits behind the real SDK):
a turn that ends in text, work longer than one cycle, delegation and mail loops."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hivemind.daemon.daemon import Daemon
from hivemind.hive.frontmatter import read_task
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply, error_body, message_body
from tests.helpers import run_until_idle, write_agent, write_task
from tests.model_habits import HabitModel, data_files


def run(hive: Hive, model: HabitModel, **options: Any) -> Daemon:
    with FakeAnthropic() as api:
        api.responder = model
        return run_until_idle(hive, scripted_model.provider(api), **options)


def records(hive: Hive, agent: str, event: str = "cycle") -> list[dict[str, Any]]:
    lines = hive.audit_path(agent).read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == event]


def human_mail(hive: Hive) -> list[str]:
    return [item.message.subject for item in Mailbox(hive, "human").unread()]


# -- 1. a turn that ends in text ---------------------------------------------------------


def test_a_task_answered_in_text_is_asked_again_and_completed(hive: Hive) -> None:
    """Before: the task stayed in active/ for ever and the run ended stalled."""
    write_agent(hive, "worker")
    write_task(hive, "text-1")
    model = HabitModel(partners={})
    daemon = run(hive, model)

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "text-1.md").is_file()
    assert model.calls["worker"] == 2  # the text, then complete_task (no closing word)
    first, second = records(hive, "worker")
    assert first["text"] == "The answer to text-1 is 42." and first["followup"] == ["text-1"]
    assert second["effects"]["tasks_completed"] == ["text-1"]
    assert first["ended"] is None and second["ended"] == "last task ended"
    assert second["followup"] == []


def test_the_follow_up_note_names_the_task_and_what_to_do(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "text-1")
    with FakeAnthropic() as api:
        api.responder = HabitModel(partners={})
        run_until_idle(hive, scripted_model.provider(api))
        second = api.message_requests[1].body
    [note] = [e for e in scripted_model.context_entries(second) if e["id"] == "context:followup"]
    assert "text-1" in note["content"]
    assert "complete_task" in note["content"] and "wait_for" in note["content"]


def test_a_model_that_only_talks_fails_the_task_with_its_words_and_tells_human_once(
    hive: Hive,
) -> None:
    write_agent(hive, "worker")
    write_task(hive, "mute-1")
    model = HabitModel(partners={})
    daemon = run(hive, model)

    assert daemon.exit_reason == "idle"
    assert model.calls["worker"] == 2  # max_idle_turns = 2
    failed = (hive.failed_dir / "mute-1.md").read_text()
    assert "no progress in 2 turns" in failed and "max_idle_turns=2" in failed
    assert "I think mute-1 comes to 42." in failed
    assert human_mail(hive) == ["[failed] mute-1"]


def test_max_idle_turns_comes_from_hive_toml(hive: Hive) -> None:
    (hive.root / "hive.toml").write_text("[agents]\nmax_idle_turns = 4\n")
    write_agent(hive, "worker")
    write_task(hive, "mute-1")
    model = HabitModel(partners={})
    run(hive, model)
    assert model.calls["worker"] == 4
    assert "max_idle_turns=4" in (hive.failed_dir / "mute-1.md").read_text()


def test_a_task_that_waits_for_something_named_is_left_waiting(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "t1")
    with FakeAnthropic() as api:
        api.responder = scripted_model.scripted(
            [scripted_model.tool_use(1, "wait_for", task_id="t1",
                                     waiting_for="the budget figures from a person")])
        daemon = run_until_idle(hive, scripted_model.provider(api))
        calls = len(api.message_requests)

    assert calls == 2  # the wait_for round and its last word; no follow-up
    assert daemon.exit_reason == "stalled"  # work left that waits: `run` exits 3
    assert (hive.active_dir_for("worker") / "t1.md").is_file()
    status = json.loads((hive.state_dir / "status.json").read_text())
    assert status["agents"]["worker"]["waiting"] == {"t1": "the budget figures from a person"}
    assert daemon.runners["worker"].agent.last_error is None


# -- 2. long work --------------------------------------------------------------------------


def test_work_longer_than_one_cycle_goes_on_to_its_end(hive: Hive) -> None:
    """Before: 8 reads, `stopped after max_steps=8 rounds`, and the task stranded."""
    write_agent(hive, "worker")
    write_task(hive, "read-1")
    data_files(hive.root)
    model = HabitModel(partners={}, reads_needed=12, reads_per_round=1)
    daemon = run(hive, model)

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "read-1.md").is_file()
    cycles = records(hive, "worker")
    assert [len(c["tool_calls"]) for c in cycles] == [8, 5]  # 12 reads, then complete_task
    assert cycles[0]["error"] is None  # long work is no error


def test_a_cycle_that_hits_max_steps_repeating_itself_is_no_progress(hive: Hive) -> None:
    write_agent(hive, "worker", front="max_steps: 2\n")
    write_task(hive, "t1")
    data_files(hive.root)
    with FakeAnthropic() as api:
        same = [scripted_model.tool_use(1, "read_file", path="workspace/data/part-1.md")]
        api.responder = lambda _b: scripted_model.Reply(
            body=scripted_model.message_body(same, stop_reason="tool_use"))
        run_until_idle(hive, scripted_model.provider(api))
    failed = (hive.failed_dir / "t1.md").read_text()
    assert "stopped" in failed  # the loop breaker or the idle turns: never stranded


def test_the_token_ceiling_per_task_ends_it_naming_the_ceiling(hive: Hive) -> None:
    write_agent(hive, "worker", front="max_tokens_per_task: 3000\n")
    write_task(hive, "read-1")
    data_files(hive.root)
    model = HabitModel(partners={}, reads_needed=1000, reads_per_round=1)
    run(hive, model)
    failed = (hive.failed_dir / "read-1.md").read_text()
    assert "reached max_tokens_per_task=3000" in failed
    assert human_mail(hive) == ["[failed] read-1"]


# -- 6. loops ---------------------------------------------------------------------------------


def test_delegation_ping_pong_is_cut_and_every_task_ends_done(hive: Hive) -> None:
    """Before: two agents handed the work back and forth until the run was stopped."""
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    write_task(hive, "pingpong-1", front="assignee: ann\n")
    model = HabitModel(partners={"ann": "bob", "bob": "ann"})
    daemon = run(hive, model, max_cycles=80)

    assert daemon.exit_reason == "idle"
    done = sorted(p.stem for p in hive.done_dir.glob("*.md"))
    assert len(done) == 4 and not list(hive.failed_dir.glob("*.md"))
    deepest = max((read_task(hive.done_dir / f"{t}.md") for t in done),
                  key=lambda t: t.lineage.depth if t.lineage else 0)
    assert deepest.lineage is not None
    assert (deepest.lineage.root, deepest.lineage.depth) == ("pingpong-1", 3)
    assert deepest.lineage.agents == ["ann", "bob", "ann"]
    refusals = [r for a in ("ann", "bob") for c in records(hive, a)
                for r in c["effects"]["refusals"]]
    assert len(refusals) == 1 and "max_passes_per_agent=2" in refusals[0]
    status = json.loads((hive.state_dir / "status.json").read_text())
    assert any(status["agents"][a]["refused"] for a in ("ann", "bob"))


def test_delegation_past_the_depth_limit_is_refused(hive: Hive) -> None:
    (hive.root / "hive.toml").write_text("[agents]\nmax_delegation_depth = 2\n")
    for name in ("ann", "bob", "cid"):
        write_agent(hive, name)
    write_task(hive, "pingpong-1", front="assignee: ann\n")
    model = HabitModel(partners={"ann": "bob", "bob": "cid", "cid": "ann"})
    daemon = run(hive, model, max_cycles=80)

    assert daemon.exit_reason == "idle"
    assert len(list(hive.done_dir.glob("*.md"))) == 3
    refusals = [r for a in ("ann", "bob", "cid") for c in records(hive, a)
                for r in c["effects"]["refusals"]]
    assert ["max_delegation_depth=2" in r for r in refusals] == [True]


def test_a_question_waits_for_its_answer_without_follow_ups(hive: Hive) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob", front="accepts_unassigned: false\n")
    write_task(hive, "ask-1", front="assignee: ann\n")
    model = HabitModel(partners={"ann": "bob", "bob": "ann"})
    run(hive, model)

    assert (hive.done_dir / "ask-1.md").is_file()
    ann = records(hive, "ann")
    assert [c["followup"] for c in ann] == [[], []]  # asked, then answered: no nudge
    # ann: the question and its last word, then complete_task (the last held task:
    # no closing call); bob: the answer and its last word (it ended no task).
    assert model.calls == {"ann": 3, "bob": 2}


def test_a_mail_loop_between_two_agents_is_cut(hive: Hive) -> None:
    """Before: two agents that answer every mail talked until the run was stopped."""
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    PostOffice(hive).send("bob", "ann", "hello", "How are you?")
    model = HabitModel(partners={}, chatty=True)
    daemon = run(hive, model, max_cycles=60)

    assert daemon.exit_reason == "idle"
    sent = [m for a in ("ann", "bob") for c in records(hive, a)
            for m in c["effects"]["messages_sent"]]
    assert len(sent) <= 11
    refusals = [r for a in ("ann", "bob") for c in records(hive, a)
                for r in c["effects"]["refusals"]]
    assert refusals and all("max_thread_messages=10" in r for r in refusals)


def test_a_follow_up_reaches_an_agent_that_runs_in_a_worker_process(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    write_task(hive, "text-1", front="assignee: bob\n")
    model = HabitModel(partners={})
    with FakeAnthropic() as api:
        api.responder = model
        # The worker makes its own provider, from hive.toml and the environment.
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        (hive.root / "hive.toml").write_text('[provider]\nname = "anthropic"\n')
        daemon = run_until_idle(hive, scripted_model.provider(api), workers=2, timeout=60)

    assert [list(link.agents) for link in daemon.workers] == [["bob"]]
    assert (hive.done_dir / "text-1.md").is_file()
    assert model.calls == {"bob": 2}  # the text, then complete_task: no closing call


def test_what_a_task_waits_for_and_its_rounds_outlive_a_restart(hive: Hive) -> None:
    write_agent(hive, "worker", front="max_rounds_per_task: 5\n")
    write_task(hive, "mute-1")
    with FakeAnthropic() as api:
        api.responder = scripted_model.scripted(
            [scripted_model.tool_use(1, "wait_for", task_id="mute-1", waiting_for="a person")])
        run_until_idle(hive, scripted_model.provider(api))
        # Restarted, the model only talks: the task still waits (no follow-up, no idle
        # turn), and its 2 rounds before count towards its ceiling of 5.
        api.responder = HabitModel(partners={})
        run_until_idle(hive, scripted_model.provider(api))
        calls = len(api.message_requests)

    assert calls == 3
    assert (hive.active_dir_for("worker") / "mute-1.md").is_file()
    last = records(hive, "worker")[-1]
    assert last["followup"] == []
    assert last["held"]["mute-1"]["waits"] == "a person" and last["held"]["mute-1"]["rounds"] == 3


# -- a provider error is no turn -------------------------------------------------------


def test_a_model_service_outage_is_no_idle_turn_and_gives_no_follow_up(hive: Hive) -> None:
    """With max_idle_turns = 2, a 529 on the follow-up of a text answer must not fail the
    task: the model's turn did not end, so it is tried again after the back-off."""
    write_agent(hive, "worker")
    write_task(hive, "text-1")
    overloaded = Reply(status=529, body=error_body("overloaded_error", "Overloaded"))
    replies = iter([
        scripted_model.text_reply("The answer to text-1 is 42."), overloaded, overloaded,
        Reply(body=message_body([scripted_model.tool_use(1, "complete_task", task_id="text-1",
                                                         result="42")], stop_reason="tool_use")),
        scripted_model.text_reply("Done."),
    ])
    with FakeAnthropic() as api:
        api.responder = lambda _body: next(replies)
        daemon = run_until_idle(hive, scripted_model.provider(api), backoff=0.01)

    assert daemon.exit_reason == "idle"
    assert (hive.done_dir / "text-1.md").is_file()
    cycles = records(hive, "worker")
    assert [c["error"] is not None for c in cycles] == [False, True, True, False]
    # Only a turn that ended gives a follow-up; the failed tries retry after a back-off.
    assert [c["followup"] for c in cycles] == [["text-1"], [], [], []]
    assert human_mail(hive) == []


def test_a_refused_key_on_a_follow_up_pauses_the_agent_and_fails_no_task(hive: Hive) -> None:
    write_agent(hive, "worker")
    write_task(hive, "text-1")
    replies = iter([scripted_model.text_reply("The answer to text-1 is 42.")])

    def model(_body: Any) -> Reply:
        return next(replies, Reply(status=401, body=error_body("authentication_error",
                                                               "invalid x-api-key")))

    with FakeAnthropic() as api:
        api.responder = model
        daemon = run_until_idle(hive, scripted_model.provider(api), backoff=0.01)
        sent = len(api.message_requests)

    assert sent == 2  # the text answer, its follow-up refused: no more tries
    assert daemon.runners["worker"].model_pause is not None
    assert (hive.tasks_dir / "text-1.md").is_file()  # given back, not failed
    assert not (hive.failed_dir / "text-1.md").exists()
    assert human_mail(hive) == ["[paused] worker: the model API refused it"]
