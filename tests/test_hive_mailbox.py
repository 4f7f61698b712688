"""Maildir delivery: atomic, never lost, never duplicated; the post office's addressing."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

import pytest

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.errors import UnknownAgentError
from hivemind.hive import mailbox as mailbox_module
from hivemind.hive.layout import HUMAN, Hive
from hivemind.hive.mailbox import Mailbox, MailItem, PostOffice, new_message_id
from hivemind.hive.models import Message
from tests.helpers import CountingProvider, fast_config, until, write_agent


def add_agents(hive: Hive, *names: str) -> None:
    for name in names:
        hive.agent_dir(name).mkdir(parents=True, exist_ok=True)
        hive.rom_path(name).write_text(f"# {name}\n")


def message(to: str = "bob", body: str = "hello\n", **fields: object) -> Message:
    return Message(id=new_message_id(), from_="alice", to=to, subject="hi", body=body, **fields)


def test_deliver_writes_new_and_leaves_tmp_empty(hive: Hive) -> None:
    box = Mailbox(hive, "bob")
    m = message()
    path = box.deliver(m)
    assert path == box.new_dir / f"{m.id}.md"
    assert os.listdir(box.tmp_dir) == []
    [item] = box.unread()
    assert (item.message.id, item.message.from_, item.message.body) == (m.id, "alice", "hello\n")
    assert item.read is False and item.path == path


def test_mark_read_moves_to_cur_and_is_idempotent(hive: Hive) -> None:
    box = Mailbox(hive, "bob")
    box.deliver(message())
    [item] = box.unread()
    first = box.mark_read(item)
    assert first.parent == box.cur_dir
    assert box.mark_read(item) == first
    assert box.unread() == []
    [seen] = box.read_items(10)
    assert seen.read is True and seen.path == first


def test_duplicate_message_id_is_delivered_once(hive: Hive) -> None:
    box = Mailbox(hive, "bob")
    m = message()
    assert box.deliver(m) is not None
    assert box.deliver(m) is None
    box.mark_read(box.unread()[0])
    assert box.deliver(m) is None  # already read: still not again
    assert len(os.listdir(box.new_dir)) + len(os.listdir(box.cur_dir)) == 1
    assert os.listdir(box.tmp_dir) == []


def test_unread_is_oldest_first(hive: Hive) -> None:
    box = Mailbox(hive, "bob")
    ids = [box.deliver(message(body=f"{i}\n")) for i in range(5)]
    assert [i.path for i in box.unread()] == ids


def test_file_without_front_matter_is_a_raw_message(hive: Hive) -> None:
    box = Mailbox(hive, "bob").ensure()
    (box.new_dir / "note.md").write_text("Call me back.\n")
    [item] = box.unread()
    assert (item.message.id, item.message.from_, item.message.to) == ("note", "unknown", "bob")
    assert item.message.body == "Call me back."


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"---\nfrom: [broken\n---\nstill here\n", id="bad-yaml"),
        pytest.param(b"caf\xe9 latin-1 text\n", id="not-utf8"),
        pytest.param(b"---\nsent_at: yesterday\n---\nwhen?\n", id="wrong-type"),
    ],
)
def test_unparsable_message_is_kept_as_raw_text_never_lost(hive: Hive, content: bytes) -> None:
    box = Mailbox(hive, "bob").ensure()
    (box.new_dir / "odd.md").write_bytes(content)
    [item] = box.unread()
    assert item.message.from_ == "unknown"
    assert item.message.body == content.decode("utf-8", errors="replace")
    assert item.message.extra["error"]
    assert (box.new_dir / "odd.md").read_bytes() == content


def _stage_then_die(root: str) -> None:
    box = Mailbox(Hive(root), "bob")
    box.stage(Message(id="m-killed", from_="alice", to="bob", body="x" * 100_000))
    os.kill(os.getpid(), signal.SIGKILL)  # between the write and the rename


def test_a_sender_killed_before_the_rename_leaves_nothing_visible(hive: Hive) -> None:
    proc = mp.get_context("fork").Process(target=_stage_then_die, args=(str(hive.root),))
    proc.start()
    proc.join(timeout=20)
    assert proc.exitcode == -signal.SIGKILL
    box = Mailbox(hive, "bob")
    assert len(os.listdir(box.tmp_dir)) == 1  # the half-delivered file stayed in tmp/
    assert box.unread() == []
    again = Message(id="m-killed", from_="alice", to="bob", body="second try\n")
    assert box.deliver(again) is not None
    [item] = box.unread()
    assert item.message.body == "second try\n"


def test_people_writing_into_new_directly_are_read_once_settled(hive: Hive) -> None:
    box = Mailbox(hive, "bob", settle_time=0.2).ensure()
    (box.new_dir / "typing.md").write_text("half a thou")
    assert box.unread() == []
    time.sleep(0.25)
    assert [i.message.id for i in box.unread()] == ["typing"]


def test_deliver_many_delivers_each_once(hive: Hive) -> None:
    box = Mailbox(hive, "bob")
    batch = [message(body=f"{i}\n") for i in range(20)]
    paths = box.deliver_many([*batch, batch[0]])
    assert all(p is not None for p in paths[:20]) and paths[20] is None
    assert len(box.unread()) == 20


def test_send_sets_from_sent_at_and_id(hive: Hive) -> None:
    add_agents(hive, "alice", "bob")
    [path] = PostOffice(hive).send("alice", "bob", "Status", "All good.\n", thread="t1", task="x")
    [item] = Mailbox(hive, "bob").unread()
    m = item.message
    assert item.path == path
    assert (m.from_, m.to, m.subject, m.thread, m.task) == ("alice", "bob", "Status", "t1", "x")
    assert m.sent_at is not None and m.id == path.stem


def test_broadcast_reaches_every_agent_and_the_human_but_not_the_sender(hive: Hive) -> None:
    add_agents(hive, "alice", "bob", "carol")
    paths = PostOffice(hive).send("alice", "*", "All hands", "Meeting.\n")
    assert sorted(p.parent.parent.name for p in paths) == ["bob", "carol", HUMAN]
    assert len({p.name for p in paths}) == 1  # one message id, one copy per mailbox
    assert Mailbox(hive, "alice").unread() == []
    [item] = Mailbox(hive, HUMAN).unread()
    assert item.message.subject == "All hands"


def test_a_list_of_recipients_gets_one_copy_each(hive: Hive) -> None:
    add_agents(hive, "alice", "bob")
    paths = PostOffice(hive).send("alice", ["bob", HUMAN, "bob"], "Hi", "x")
    assert sorted(p.parent.parent.name for p in paths) == ["bob", HUMAN]
    for name in ("bob", HUMAN):
        box = Mailbox(hive, name)
        assert {d.name for d in box.dir.iterdir()} == {"tmp", "new", "cur"}


def test_unknown_recipient_is_refused_listing_the_agents(hive: Hive) -> None:
    add_agents(hive, "alice", "bob")
    with pytest.raises(UnknownAgentError, match=r"'zed' \(agents: alice, bob; or human"):
        PostOffice(hive).send("alice", ["bob", "zed"], "Hi", "x")
    assert not Mailbox(hive, "bob").new_dir.exists()  # nothing sent when one name is wrong


def _ids(n: int, out: mp.Queue[list[str]]) -> None:
    out.put([new_message_id() for _ in range(n)])


def test_message_ids_are_unique_across_processes_and_sort_by_time() -> None:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_ids, args=(2000, out)) for _ in range(4)]
    for p in procs:
        p.start()
    batches = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join()
    every = [i for batch in batches for i in batch]
    assert len(set(every)) == len(every)
    for batch in batches:
        assert batch == sorted(batch)  # a sender's ids sort in the order it made them
    first, later = new_message_id(), (time.sleep(0.002), new_message_id())[1]
    assert first < later
    assert first[:8].isdigit() and "T" in first and first.index("Z") == 22


def test_mailbox_name_must_be_a_plain_folder_name(hive: Hive) -> None:
    with pytest.raises(Exception, match="mailbox name"):
        Mailbox(hive, "../escape")


def test_a_symlink_in_new_is_not_read(hive: Hive, tmp_path: Path) -> None:
    box = Mailbox(hive, "bob").ensure()
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    (box.new_dir / "link.md").symlink_to(secret)
    assert box.unread() == []


def test_a_symlink_in_new_is_warned_of_once_while_the_daemon_runs(
    hive: Hive, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_agent(hive, "bob", front="heartbeat: 0.05\n")
    box = Mailbox(hive, "bob").ensure()
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    (box.new_dir / "link.md").symlink_to(secret)
    daemon = Daemon(hive, fast_config(hive), CountingProvider(),
                    RunOptions(until_idle=True, idle_settle=0.2))

    async def main() -> None:
        run = asyncio.create_task(daemon.run())
        await asyncio.sleep(1.5)  # heartbeats, status refreshes, idle checks
        daemon.stop("test")
        await run

    asyncio.run(main())
    said = [r for r in caplog.records if "link.md: not a regular file" in r.getMessage()]
    assert len(said) == 1


# -- a file name or an `id:` used again by hand ---------------------------------------


def write_by_hand(box: Mailbox, name: str, text: str, front: str = "") -> Path:
    path = box.new_dir / name
    path.write_text(f"---\nfrom: human\n{front}---\n{text}\n")
    return path


def read_one(box: Mailbox) -> tuple[str, str]:
    """Read the one unread message as a cycle does (then mark it read): (id, body)."""
    [item] = box.unread()
    box.mark_read(item)
    return item.message.id, item.message.body


def bodies_in_cur(box: Mailbox) -> list[str]:
    return sorted(p.read_text().rsplit("---\n", 1)[-1].strip() for p in box.cur_dir.iterdir())


def test_a_second_message_under_a_read_ones_name_is_new_mail_and_both_are_kept(
    hive: Hive,
) -> None:
    """`msg.md` for every message by hand: the second was ignored while the daemon ran
    (its id was seen), and after a restart it replaced the first in cur/."""
    box = Mailbox(hive, "bob").ensure()
    write_by_hand(box, "note.md", "FIRST")
    first = read_one(box)
    write_by_hand(box, "note.md", "SECOND")
    second = read_one(box)

    assert first == ("note", "FIRST")
    assert second[1] == "SECOND" and second[0] != first[0]
    assert bodies_in_cur(box) == ["FIRST", "SECOND"]


def test_a_message_reusing_a_read_ones_id_is_new_mail(hive: Hive) -> None:
    """A message copied as a template keeps its `id:`; it is still another message."""
    box = Mailbox(hive, "bob").ensure()
    write_by_hand(box, "a1.md", "one", front="id: tmpl\n")
    first = read_one(box)
    write_by_hand(box, "a2.md", "two", front="id: tmpl\n")
    looks = [item.message.id for _ in range(3) for item in box.unread()]

    assert first == ("tmpl", "one")
    assert len(set(looks)) == 1 and looks[0] != "tmpl"  # the same fresh id at every look
    assert read_one(box) == (looks[0], "two")


def test_marking_read_never_replaces_a_message_already_in_cur(hive: Hive) -> None:
    """After a restart nothing remembers the first message: the move must not replace it."""
    write_by_hand(Mailbox(hive, "bob").ensure(), "note.md", "FIRST")
    box = Mailbox(hive, "bob")
    read_one(box)
    write_by_hand(box, "note.md", "SECOND")
    after_restart = Mailbox(hive, "bob")

    assert read_one(after_restart) == ("note", "SECOND")
    assert sorted(os.listdir(box.cur_dir)) == ["note-1.md", "note.md"]
    assert bodies_in_cur(box) == ["FIRST", "SECOND"]


def test_a_longest_name_taken_in_cur_is_marked_read_under_a_shorter_one(hive: Hive) -> None:
    """`-1` on a 255-byte name is past what a file name holds: mark_read raised, and the
    message was read again every cycle."""
    name = "m" * 252 + ".md"
    write_by_hand(Mailbox(hive, "bob").ensure(), name, "FIRST")
    read_one(Mailbox(hive, "bob"))
    box = Mailbox(hive, "bob")
    write_by_hand(box, name, "SECOND")

    read_one(box)

    assert sorted(os.listdir(box.cur_dir)) == ["m" * 250 + "-1.md", name]
    assert bodies_in_cur(box) == ["FIRST", "SECOND"]


@pytest.mark.parametrize(
    ("front", "by_inode"),
    [("id: mine\n", True), ("", True), ("id: mine\n", False)],
    ids=["with-id", "raw-name-id", "by-message-id"],
)
def test_mail_marked_read_by_another_mailbox_is_found_where_it_went(
    hive: Hive, front: str, by_inode: bool
) -> None:
    """cur/note.md holds another message: the one read went to note-1.md, and the item
    must say so (it was made to point at note.md, the other message)."""
    box = Mailbox(hive, "bob").ensure()
    (box.cur_dir / "note.md").write_text("---\nid: other\nfrom: human\n---\nOTHER\n")
    write_by_hand(box, "note.md", "MINE", front=front)
    [item] = box.unread()
    if not by_inode:
        item = MailItem(item.message, item.path)  # made by a caller, not listed
    elsewhere = Mailbox(hive, "bob")
    elsewhere.mark_read(elsewhere.unread()[0])

    assert box.mark_read(item) == box.cur_dir / "note-1.md"
    assert item.path == box.cur_dir / "note-1.md" and item.read
    assert item.path.read_text().endswith("MINE\n")


def test_a_message_that_cannot_be_marked_read_is_logged_and_the_others_still_are(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    """A cycle marks its mail read one by one: one error ended the loop, and the rest
    were read again next cycle."""
    box = Mailbox(hive, "bob").ensure()
    write_by_hand(box, "a.md", "GONE")
    write_by_hand(box, "b.md", "KEPT")
    gone, kept = box.unread()
    gone.path.unlink()  # removed by hand after it was read

    for item in (gone, kept):
        box.mark_read(item)

    assert (gone.read, kept.read) == (False, True)
    assert os.listdir(box.cur_dir) == ["b.md"]
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert line == "mailboxes/bob/new/a.md: not marked read: it is no longer in new/ or cur/"


def test_mail_that_cannot_move_to_cur_stays_unread_with_one_warning(
    hive: Hive, caplog: pytest.LogCaptureFixture
) -> None:
    box = Mailbox(hive, "bob").ensure()
    write_by_hand(box, "a.md", "ONE")
    box.cur_dir.rmdir()
    box.cur_dir.write_text("a file where cur/ should be\n")
    [item] = box.unread()

    assert box.mark_read(item) == box.new_dir / "a.md"
    assert box.mark_read(item) == box.new_dir / "a.md"  # told once

    assert not item.read and [i.path for i in box.unread()] == [box.new_dir / "a.md"]
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert line == ("mailboxes/bob/new/a.md: not marked read: it cannot move to cur/ "
                    "(Not a directory); it stays in new/")


def test_a_second_hand_written_message_with_the_same_name_wakes_the_agent(hive: Hive) -> None:
    write_agent(hive, "worker")
    box = Mailbox(hive, "worker").ensure()
    replies = Mailbox(hive, HUMAN)
    daemon = Daemon(hive, fast_config(hive), CountingProvider(), RunOptions())

    async def main() -> None:
        run = asyncio.create_task(daemon.run())
        write_by_hand(box, "note.md", "FIRST", front="subject: first\n")
        await until(lambda: len(replies.unread()) == 1, "the first message is answered")
        await until(lambda: not list(box.new_dir.iterdir()), "it is marked read")
        write_by_hand(box, "note.md", "SECOND", front="subject: second\n")
        await until(lambda: len(replies.unread()) == 2, "the second message is answered")
        daemon.stop("test")
        await run

    asyncio.run(main())
    assert sorted(i.message.subject for i in replies.unread()) == [
        "[offline] Re: first", "[offline] Re: second"]
    assert bodies_in_cur(box) == ["FIRST", "SECOND"]


def test_the_ids_of_read_mail_remembered_are_bounded(
    hive: Hive, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon that runs for months must not remember every id it ever read."""
    monkeypatch.setattr(mailbox_module, "READ_IDS_KEPT", 3)
    box = Mailbox(hive, "bob").ensure()
    for n in range(5):
        write_by_hand(box, f"a{n}.md", f"text {n}", front=f"id: m{n}\n")
        assert read_one(box) == (f"m{n}", f"text {n}")
    write_by_hand(box, "b4.md", "again", front="id: m4\n")
    write_by_hand(box, "b0.md", "again", front="id: m0\n")

    ids = sorted(item.message.id for item in box.unread())

    # m4 is remembered: another message under a fresh id; m0 is forgotten: read as is.
    assert ids[0] == "m0" and ids[1].startswith("m4-")


@pytest.mark.parametrize("swap", ["symlink", "hard-link"])
def test_a_message_swapped_for_a_link_is_never_kept_as_raw_text(
    hive: Hive, tmp_path: Path, swap: str
) -> None:
    """A message refused as a link (read_text: ELOOP) was read again, through the link,
    to keep it as a raw message: a racing swap carried a user's file into the prompt."""
    secret = tmp_path / "secret.txt"
    secret.write_text("THE USER'S SECRET\n")
    new = hive.mailbox_dir("bob") / "new"
    new.mkdir(parents=True)
    path = new / "m1.md"
    if swap == "symlink":
        path.symlink_to(secret)
    else:
        os.link(secret, path)

    kept = mailbox_module.raw_message(path, "bob", "not a regular file")

    assert "SECRET" not in kept.body
