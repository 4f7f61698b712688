"""`hivemind memory forget ID...`: deleting memories, and declining a proposal."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hivemind.cli.app import app
from hivemind.hive.layout import HUMAN, Hive
from hivemind.ltm.store import LongTermMemory

runner = CliRunner()


def run(hive: Hive, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["memory", *args, "--hive", str(hive.root)])
    return result.exit_code, result.stdout, result.stderr


def add(hive: Hive, text: str, *options: str) -> str:
    code, out, _ = run(hive, "add", text, *options, "--json")
    assert code == 0
    return str(json.loads(out)["id"])


def stored_ids(hive: Hive) -> set[str]:
    _, out, _ = run(hive, "export")
    return {json.loads(line)["id"] for line in out.splitlines()}


def test_forget_deletes_the_memories_named(hive: Hive) -> None:
    first, second, kept = (add(hive, t) for t in ("staging is red", "prod is blue", "dev"))
    code, out, err = run(hive, "forget", first, second)
    assert code == 0 and err == ""
    assert out.splitlines() == [f"forgot {first}", f"forgot {second}"]
    assert stored_ids(hive) == {kept}
    _, found, _ = run(hive, "search", "staging", "--json")
    assert json.loads(found) == []


def test_unknown_ids_are_errors_one_line_each_and_the_rest_is_forgotten(hive: Hive) -> None:
    known = add(hive, "staging is red")
    code, out, err = run(hive, "forget", "m-nope", known, "m-gone")
    assert code == 1
    assert err.splitlines() == [
        "error: no memory with id 'm-nope'", "error: no memory with id 'm-gone'"
    ]  # fmt: skip
    assert out.splitlines() == [f"forgot {known}"]
    assert stored_ids(hive) == set()


@pytest.mark.parametrize(
    ("unknown", "code"), [(False, 0), (True, 1)], ids=["all-known", "one-unknown"]
)
def test_forget_json_names_what_was_forgotten_and_what_was_unknown(
    hive: Hive, unknown: bool, code: int
) -> None:
    known = add(hive, "staging is red")
    ids = [known, "m-nope"] if unknown else [known]
    got, out, _ = run(hive, "forget", *ids, "--json")
    assert got == code
    assert json.loads(out) == {"forgotten": [known], "unknown": ["m-nope"] if unknown else []}


def test_forget_declines_a_proposed_preference(hive: Hive) -> None:
    proposal = add(hive, "Reply in British English", "--preference")
    code, _, _ = run(hive, "forget", proposal)
    assert code == 0 and stored_ids(hive) == set()
    code, _, err = run(hive, "approve", proposal)
    assert code == 1 and "no memory with id" in err


def test_the_proposal_says_how_to_decline_it(hive: Hive) -> None:
    with LongTermMemory(hive) as ltm:  # an agent's proposal
        memory_id = ltm.remember("Reply in British English", agent="ann", scope="global",
                                 preference=True).id
    [message] = (hive.mailbox_dir(HUMAN) / "new").glob("*.md")
    assert f"To decline: hivemind memory forget {memory_id}" in message.read_text()


def test_approve_help_names_forget_for_declining() -> None:
    result = runner.invoke(app, ["memory", "approve", "--help"])
    assert "hivemind memory forget ID" in result.stdout


def test_forget_needs_an_id(hive: Hive) -> None:
    code, _, err = run(hive, "forget")
    assert code == 2 and "Missing argument" in err
