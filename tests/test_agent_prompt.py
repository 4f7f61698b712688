"""The system prompt: the preamble, the team and the ROM's instructions, no settings."""

from __future__ import annotations

import pytest

from hivemind.agent.prompt import instructions, system_prompt
from hivemind.hive.layout import Hive
from tests.helpers import CountingProvider, run_until_idle, write_agent, write_task

SETTINGS = (
    "# This front matter configures the agent\n"
    "skills: [writing]   # routes unassigned tasks that mention these\n"
    "heartbeat: 0        # seconds between unprompted cycles\n"
)


def test_the_model_gets_the_roms_instructions_without_its_front_matter(hive: Hive) -> None:
    write_agent(hive, "ann", front=SETTINGS, body="You are ann.\n\nEND-OF-ROM\n")
    write_task(hive, "t1", front="assignee: ann\n")
    provider = CountingProvider()
    run_until_idle(hive, provider)

    system = provider.requests[0].system
    assert system.startswith("You are ann (ann of the test hive), an agent of a hive")
    assert system.endswith("# Your ROM\n\nYou are ann.\n\nEND-OF-ROM\n")
    for setting in ("heartbeat", "skills:", "routes unassigned", "role:", "---"):
        assert setting not in system


@pytest.mark.parametrize(
    ("rom", "said"),
    [
        ("no front matter\n", "no front matter\n"),
        ("---\nrole: x\n---\n\n\nbody\n", "body\n"),
        ("---\nrole: x\nnever closed\n", "---\nrole: x\nnever closed\n"),
    ],
    ids=["plain", "front-matter", "unclosed"],
)
def test_instructions_are_the_rom_less_its_front_matter(rom: str, said: str) -> None:
    assert instructions(rom) == said
    assert system_prompt("x", rom).endswith(said)


@pytest.mark.parametrize(
    ("role", "said"),
    [
        ("lead — splits work into tasks", "splits work into tasks"),
        ("Lead: splits work", "splits work"),
        ("lead - splits work", "splits work"),
        ("lead-writer of docs", "lead-writer of docs"),  # a compound word
        ("leader of the team", "leader of the team"),  # another word, not the name
        ("lead", "lead"),  # nothing but the name: kept
    ],
    ids=["dash", "colon-any-case", "hyphen", "compound", "longer-word", "name-only"],
)
def test_a_role_is_said_without_the_name_it_opens_with(role: str, said: str) -> None:
    # "You are lead (lead — splits work …)" said the name twice, in every request.
    system = system_prompt("lead", "Lead.\n", [["lead", role], ["bob", f"bob — {said}"]],
                           role=role)
    assert system.startswith(f"You are lead ({said}), ")
    assert f"Your team: bob ({said})\n" in system


def test_the_system_prompt_says_a_message_entry_is_mail_to_the_agent() -> None:
    # A mail entry carries no `to`: being in the context is being the agent's own mail.
    system = system_prompt("ann", "Ann.\n")
    assert '(metadata.type "message": mail to you)' in system
