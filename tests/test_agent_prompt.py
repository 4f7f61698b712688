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
    assert system.startswith("You are ann (ann of the test hive), one agent of a hive")
    assert system.endswith("# Your ROM (agents/ann/ROM.md)\n\nYou are ann.\n\nEND-OF-ROM\n")
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
