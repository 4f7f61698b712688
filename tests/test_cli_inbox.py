"""`hivemind inbox`, `inbox read ID`, `inbox reply ID TEXT`: your mail from the agents."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from hivemind.cli.app import app
from hivemind.hive.frontmatter import read_message
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from tests.helpers import write_agent


def run(hive: Hive, *args: str, code: int = 0, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(app, [*args, "--hive", str(hive.root)], input=stdin)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def one_line_error(result: Result) -> str:
    text = result.output.strip()
    assert text.startswith("error: ") and "\n" not in text, text
    return text


@pytest.fixture
def mail(hive: Hive) -> Hive:
    """Three messages to human from two agents, an hour apart (the newest from bob)."""
    write_agent(hive, "ann")
    write_agent(hive, "bob")
    post = PostOffice(hive, fsync=False)
    start = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
    for n, (sender, subject) in enumerate([("ann", "[done] Report"), ("ann", "A question"),
                                           ("bob", "Numbers ready")]):
        post.send(sender, HUMAN, subject, f"body of {subject}", id=f"m{n}-{sender}",
                  task="t1" if n == 0 else None)
        path = hive.mailbox_dir(HUMAN) / "new" / f"m{n}-{sender}.md"
        text = path.read_text()
        sent = (start + timedelta(hours=n)).isoformat()
        path.write_text("\n".join(f"sent_at: {sent}" if line.startswith("sent_at:") else line
                                  for line in text.splitlines()) + "\n")
    return hive


def test_the_list_shows_unread_mail_newest_first_with_sender_and_subject(mail: Hive) -> None:
    lines = run(mail, "inbox").output.splitlines()
    rows = [line.split() for line in lines[1:4]]
    assert [r[:3] for r in rows] == [["*", "m2-bob", "bob"], ["*", "m1-ann", "ann"],
                                     ["*", "m0-ann", "ann"]]
    assert "Numbers ready" in lines[1] and "2026-11-20" in lines[1]
    assert lines[-1].startswith("3 unread, 0 read.")


def test_reading_a_message_shows_it_and_moves_it_to_cur(mail: Hive) -> None:
    out = run(mail, "inbox", "read", "m0-ann").output
    assert "From:       ann" in out and "Subject:    [done] Report" in out
    assert "Task:       t1" in out and "body of [done] Report" in out
    box = mail.mailbox_dir(HUMAN)
    assert not (box / "new" / "m0-ann.md").exists()
    assert (box / "cur" / "m0-ann.md").is_file()
    listed = run(mail, "inbox").output.splitlines()
    assert listed[3].split()[:2] == ["m0-ann", "ann"]  # read: no star
    assert listed[-1].startswith("2 unread, 1 read.")


def test_the_start_of_an_id_is_enough_when_no_other_id_starts_the_same(mail: Hive) -> None:
    assert "body of Numbers ready" in run(mail, "inbox", "read", "m2").output
    text = one_line_error(run(mail, "inbox", "read", "m", code=1))
    assert "'m' starts the ids of 3 messages (m0-ann, m1-ann, m2-bob" in text


@pytest.mark.parametrize("command", ["read", "reply"])
def test_an_unknown_id_is_one_line(mail: Hive, command: str) -> None:
    args = ["inbox", command, "nope"] + (["hi"] if command == "reply" else [])
    text = one_line_error(run(mail, *args, code=1))
    assert text == "error: no message 'nope' in mailboxes/human/ (hivemind inbox lists them)"
    assert len(list((mail.mailbox_dir(HUMAN) / "new").iterdir())) == 3  # nothing moved


def test_reply_goes_to_the_sender_in_the_same_thread_from_human(mail: Hive) -> None:
    out = run(mail, "inbox", "reply", "m1", "Yes, go ahead").output
    [item] = Mailbox(mail, "ann").unread()
    assert out.strip() == f"sent to ann: {item.path}"
    m = item.message
    assert (m.from_, m.to, m.subject, m.body) == (HUMAN, "ann", "Re: A question",
                                                  "Yes, go ahead")
    assert (m.in_reply_to, m.thread) == ("m1-ann", "m1-ann")
    assert (mail.mailbox_dir(HUMAN) / "cur" / "m1-ann.md").is_file()  # answered: read
    assert Mailbox(mail, "bob").unread() == []


def test_reply_keeps_the_thread_and_task_of_the_message_answered(mail: Hive) -> None:
    PostOffice(mail, fsync=False).send("bob", HUMAN, "Re: Re: x", "more", id="m9-bob",
                                       thread="th-1", task="t7")
    run(mail, "inbox", "reply", "m9", "-", stdin="from stdin\n")
    [item] = Mailbox(mail, "bob").unread()
    assert (item.message.thread, item.message.task, item.message.subject) == (
        "th-1", "t7", "Re: Re: x")
    assert item.message.body == "from stdin"


def test_reply_to_a_message_of_no_agent_is_refused_in_one_line(mail: Hive) -> None:
    raw = mail.mailbox_dir(HUMAN) / "new" / "scribble.md"
    raw.write_text("no front matter, from no one")
    text = one_line_error(run(mail, "inbox", "reply", "scribble", "hi", code=1))
    assert "is from 'unknown', which is no agent of this hive" in text
    assert raw.is_file()  # not read: the reply was not sent
    assert "no front matter, from no one" in run(mail, "inbox", "read", "scribble").output


def test_an_empty_reply_is_refused(mail: Hive) -> None:
    assert one_line_error(run(mail, "inbox", "reply", "m0", " ", code=1)) == (
        "error: the answer is empty")


def test_read_mail_beyond_n_is_counted_not_listed(mail: Hive) -> None:
    for key in ("m0", "m1", "m2"):
        run(mail, "inbox", "read", key)
    out = run(mail, "inbox", "-n", "1").output.splitlines()
    assert len(out) == 3 and out[1].split()[0] == "m2-bob"
    assert out[-1].startswith("0 unread, 3 read; 2 older read (--all)")
    assert len(run(mail, "inbox", "--all").output.splitlines()) == 5


def test_json_lists_every_field(mail: Hive) -> None:
    listed = json.loads(run(mail, "inbox", "--json").output)
    assert [(m["id"], m["from"], m["read"]) for m in listed] == [
        ("m2-bob", "bob", False), ("m1-ann", "ann", False), ("m0-ann", "ann", False)]
    shown = json.loads(run(mail, "inbox", "read", "m2", "--json").output)
    assert shown["body"] == "body of Numbers ready" and Path(shown["path"]).parent.name == "cur"
    assert read_message(Path(shown["path"])).id == "m2-bob"


def test_an_empty_mailbox_says_so(hive: Hive) -> None:
    assert run(hive, "inbox").output.strip() == "no mail in mailboxes/human/"
