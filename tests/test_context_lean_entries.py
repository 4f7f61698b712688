"""Context entries without the fields that tell the model nothing it can act on, and
the information those fields carried still where the model needs it.

Left out: a mail's `message_id` (its entry id names it, and send_message's
`in_reply_to` takes that id; the id is short, the mail's time being its timestamp),
a mail's `to` (it is in the agent's own mailbox), a note's `bytes` (its text is the
entry), its time (a note is shown as it is now) and its topic when its text opens
with that heading; a status with no task to count says none.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

import pytest

from hivemind.agent.inspect import request_of
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.memory.mailids import mail_entry_id
from tests import scripted_model
from tests.fake_anthropic import FakeAnthropic, Reply
from tests.helpers import run_until_idle, write_agent
from tests.test_tools import call, make_ctx


def entries(hive: Hive, agent: str) -> list[dict[str, Any]]:
    return list(json.loads(asyncio.run(request_of(hive, agent))["context"]))


def test_a_mail_entry_carries_no_message_id_nor_to(hive: Hive) -> None:
    write_agent(hive, "worker")
    PostOffice(hive).send(HUMAN, "worker", "Figures", "How many?", id="m1-human")
    [mail] = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "message"]
    assert mail["id"] == mail_entry_id("m1-human.md")  # the id names the mail...
    assert mail["metadata"] == {"type": "message", "timestamp": mail["metadata"]["timestamp"],
                                "from": HUMAN, "subject": "Figures"}  # ...said once


@pytest.mark.parametrize(
    ("thread", "answered_by"),
    [
        pytest.param(None, "entry-id", id="by-entry-id"),
        pytest.param("th-7", "entry-id", id="in-its-thread"),
        pytest.param(None, "message-id", id="by-message-id"),
    ],
)
def test_a_mail_is_answered_by_the_id_its_entry_shows(
    hive: Hive, thread: str | None, answered_by: str
) -> None:
    write_agent(hive, "worker")
    fields = {"thread": thread} if thread else {}
    PostOffice(hive).send(HUMAN, "worker", "Figures", "How many?", id="m1-human", **fields)

    def model(body: Any) -> Reply:
        if not scripted_model.is_first_round(body):
            return scripted_model.text_reply("answered")
        [mail] = [e for e in scripted_model.context_entries(body)
                  if e["metadata"]["type"] == "message"]
        named = mail["id"] if answered_by == "entry-id" else "m1-human"
        return Reply(body=scripted_model.message_body([scripted_model.tool_use(
            1, "send_message", to=mail["metadata"]["from"], body="Forty-two.",
            in_reply_to=named)]))

    with FakeAnthropic() as api:
        api.responder = model
        run_until_idle(hive, scripted_model.provider(api))
    [reply] = Mailbox(hive, HUMAN).unread()
    assert reply.message.body == "Forty-two."
    assert reply.message.in_reply_to == "m1-human"  # the message id, as before
    assert reply.message.thread == (thread or "m1-human")


def test_a_note_entry_is_its_text_under_its_path(hive: Hive) -> None:
    write_agent(hive, "worker")
    text = "# Refunds\n\nWithin 30 days.\n"
    (hive.knowledge_dir / "refunds.md").write_text(text)
    [note] = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "knowledge"]
    # The path is the id, the topic its first line, its size that of the content.
    assert note == {"id": "knowledge/refunds.md", "content": text,
                    "metadata": {"type": "knowledge"}}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("---\nowner: ann\n---\n# Refunds\n\nWithin 30 days.\n", id="front-matter"),
        pytest.param("Read this first.\n\n# Refunds\n\nWithin 30 days.\n", id="heading-later"),
    ],
)
def test_a_note_whose_text_does_not_open_with_its_topic_keeps_it(
    hive: Hive, text: str
) -> None:
    write_agent(hive, "worker")
    (hive.knowledge_dir / "refunds.md").write_text(text)
    [note] = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "knowledge"]
    assert note["metadata"]["topic"] == "Refunds"


def test_a_note_touched_but_unchanged_leaves_the_request_as_it_was(hive: Hive) -> None:
    write_agent(hive, "worker")
    note = hive.knowledge_dir / "refunds.md"
    note.write_text("# Refunds\n\nWithin 30 days.\n")
    PostOffice(hive).send(HUMAN, "worker", "Figures", "How many?", id="m1-human")
    before = asyncio.run(request_of(hive, "worker"))
    st = note.stat()
    os.utime(note, (st.st_atime + 3600, st.st_mtime + 3600))  # saved again, same text
    after = asyncio.run(request_of(hive, "worker"))
    assert after["context_stable_chars"] == before["context_stable_chars"]
    stable = before["context"][: before["context_stable_chars"]]
    assert after["context"].startswith(stable)  # the cached prefix holds
    note.write_text("# Refunds\n\nWithin 60 days.\n")  # an edit is seen at once
    assert "Within 60 days." in asyncio.run(request_of(hive, "worker"))["context"]


def test_the_status_entry_says_no_task_counts_when_none_can_be_acted_on(hive: Hive) -> None:
    write_agent(hive, "worker")
    PostOffice(hive).send(HUMAN, "worker", "Figures", "How many?", id="m1-human")
    [status] = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "status"]
    assert status["content"] == "{}"  # no tasks at all: nothing to count
    assert status["metadata"]["timestamp"].endswith("Z")  # still the time it is now
    write_agent(hive, "other")
    (hive.tasks_dir / "t1.md").write_text("---\nassignee: other\n---\n# t1\n\nDo it.\n")
    [status] = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "status"]
    assert json.loads(status["content"]) == {"tasks": {"pending": 1}}


def test_mail_is_shown_oldest_first_under_a_short_id(hive: Hive) -> None:
    write_agent(hive, "worker")
    for n in range(6):
        PostOffice(hive).send(HUMAN, "worker", f"q{n}", f"Question {n}?")
    mails = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "message"]
    assert [m["content"] for m in mails] == [f"Question {n}?" for n in range(6)]
    assert all(re.fullmatch(r"msg:[0-9a-f]{10}", m["id"]) for m in mails)
    assert len({m["id"] for m in mails}) == 6


async def test_a_mail_out_of_view_is_answered_by_its_entry_id(hive: Hive) -> None:
    ctx = make_ctx(hive)  # nothing in view: the mail is found by its file's name
    [path] = PostOffice(hive).send(HUMAN, "worker", "Figures", "How many?", id="m1-human")
    content, is_error = await call(ctx, "send_message", to=HUMAN, body="Forty-two.",
                                   in_reply_to=mail_entry_id(path.name))
    assert not is_error, content
    [reply] = Mailbox(hive, HUMAN).unread()
    assert (reply.message.in_reply_to, reply.message.thread) == ("m1-human", "m1-human")


def test_a_notes_size_still_sizes_it_before_it_is_read(hive: Hive) -> None:
    # `bytes` left the entry, not the block: the selector guesses a note's tokens from
    # it before reading it, so a big note is weighed as big.
    from hivemind.agent.inspect import inspect_agent

    write_agent(hive, "worker")
    (hive.knowledge_dir / "small.md").write_text("# Small\n\nOne line.\n")
    (hive.knowledge_dir / "big.md").write_text("# Big\n\n" + "A line of the note.\n" * 400)
    rows = {r["id"]: r for r in asyncio.run(inspect_agent(hive, "worker"))["blocks"]}
    big, small = rows["knowledge/big.md"], rows["knowledge/small.md"]
    assert big["estimated"] > 1000 > small["estimated"]
    assert "bytes" not in json.dumps([e["metadata"] for e in entries(hive, "worker")])


def test_a_first_reply_says_what_it_answers_once(hive: Hive) -> None:
    write_agent(hive, "worker")
    post = PostOffice(hive)
    post.send(HUMAN, "worker", "Re: figures", "Yes.", id="m2-human", thread="m1-worker",
              in_reply_to="m1-worker")
    post.send(HUMAN, "worker", "Re: Re: figures", "And no.", id="m3-human",
              thread="m1-worker", in_reply_to="m2-worker")
    first, later = [e["metadata"] for e in entries(hive, "worker")
                    if e["metadata"]["type"] == "message"]
    assert first["in_reply_to"] == "m1-worker" and "thread" not in first  # the same id
    assert (later["thread"], later["in_reply_to"]) == ("m1-worker", "m2-worker")


def test_a_read_mail_says_it_is_read_not_its_lower_priority(hive: Hive) -> None:
    write_agent(hive, "worker")
    PostOffice(hive).send(HUMAN, "worker", "Figures", "How many?", id="m1-human")
    mailbox = Mailbox(hive, "worker")
    for item in mailbox.unread():
        mailbox.mark_read(item)
    [mail] = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "message"]
    assert mail["metadata"]["read"] is True
    assert "priority" not in mail  # read mail is always medium: `read` says it


def test_a_steps_call_is_recorded_as_compact_json() -> None:
    # A history entry's detail is JSON inside a JSON string: each ", " and ": " of it
    # (and the quotes around it, escaped) is paid for in every later request.
    from hivemind.agent.toolrun import short

    call = {"path": "workspace/a.md", "content": "Two lines,\nwith: colons."}
    assert short(call) == '{"path":"workspace/a.md","content":"Two lines,\\nwith: colons."}'
    assert json.loads(short(call)) == call  # still the call, read back whole
    assert short("plain text, as it is") == "plain text, as it is"


def test_a_task_entry_shows_the_front_matter_its_metadata_does_not(hive: Hive) -> None:
    write_agent(hive, "worker")
    task = hive.tasks_dir / "notes.md"
    text = ("---\nid: notes-0-2\ntitle: Write the notes\npriority: high\nassignee: worker\n"
            "project: hivemind\nreply_to: lead\ncreated_by: lead\n---\n# Write the notes\n\n"
            "Collect the changes.\n")
    task.write_text(text)
    [entry] = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "task"]
    meta = entry["metadata"]
    assert (meta["task_id"], meta["title"], meta["project"], meta["reply_to"]) == (
        "notes-0-2", "Write the notes", "hivemind", "lead")  # said here, typed...
    assert entry["content"] == ("---\npriority: high\nassignee: worker\ncreated_by: lead\n"
                                "---\n# Write the notes\n\nCollect the changes.\n")  # ...once
    assert task.read_text() == text  # the file is as it was


@pytest.mark.parametrize(
    ("front", "content"),
    [
        pytest.param("id: t1\ntitle: Do it\n", "# Do it\n\nNow.\n", id="all-said: no fence"),
        pytest.param("created_by: lead\n", None, id="a-field-not-in-metadata-stays"),
        pytest.param("title: 'Do it'\n", "# Do it\n\nNow.\n", id="quoted"),
    ],
)
def test_front_matter_lines_go_only_when_the_metadata_says_the_same(
    hive: Hive, front: str, content: str | None
) -> None:
    write_agent(hive, "worker")
    text = f"---\n{front}---\n# Do it\n\nNow.\n"
    (hive.tasks_dir / "t1.md").write_text(text)
    [entry] = [e for e in entries(hive, "worker") if e["metadata"]["type"] == "task"]
    assert entry["content"] == (text if content is None else content)
