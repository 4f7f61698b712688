"""Your own mail, `mailboxes/human/`: list it, find a message by its id (or the start of
it, as git takes a commit), read it (new/ → cur/, as a maildir does), answer it.

Listing costs what is shown: new/ is read whole (it is what you have not read yet),
cur/ only for its newest files by their time on disk.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from hivemind.errors import FileFormatError, UserError
from hivemind.hive.frontmatter import message_from_text
from hivemind.hive.layout import HUMAN, Hive, is_temp_name
from hivemind.hive.mailbox import Mailbox, MailItem, PostOffice, raw_bytes, raw_message

SHORT_ID = 8
"""The fewest characters of an id shown: more where needed to tell it apart."""


class UnknownMessageError(UserError):
    """No message of the mailbox has that id (or that start of an id)."""


@dataclass(frozen=True)
class _Entry:
    """A message file: its id (the file's name without .md) and its folder."""

    key: str
    path: Path
    read: bool
    mtime: float


class Inbox:
    """The person's mailbox (`human`) of a hive."""

    def __init__(self, hive: Hive) -> None:
        self.hive = hive
        self.box = Mailbox(hive, HUMAN)
        self._entries: list[_Entry] | None = None

    # -- listing -----------------------------------------------------------------
    def entries(self) -> list[_Entry]:
        """Every message file of new/ and cur/ (names and times only, nothing parsed)."""
        if self._entries is None:
            self._entries = [*self._scan(self.box.new_dir, read=False),
                             *self._scan(self.box.cur_dir, read=True)]  # fmt: skip
        return self._entries

    @staticmethod
    def _scan(folder: Path, read: bool) -> list[_Entry]:
        try:
            found = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for e in found:
            if is_temp_name(e.name):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(_Entry(e.name.removesuffix(".md"), Path(e.path), read, st.st_mtime))
        return out

    def listing(self, read_shown: int = 10) -> list[MailItem]:
        """Every unread message and the `read_shown` newest read ones, newest first."""
        entries = self.entries()
        unread = [e for e in entries if not e.read]
        read = sorted((e for e in entries if e.read), key=lambda e: e.mtime)
        chosen = unread + (read[-read_shown:] if read_shown > 0 else [])
        items = [self.item(e) for e in chosen]
        return sorted(items, key=_newest_first)

    def counts(self) -> tuple[int, int]:
        """(unread, read) messages."""
        unread = sum(1 for e in self.entries() if not e.read)
        return unread, len(self.entries()) - unread

    def short_ids(self) -> dict[str, str]:
        """Each message's id as shown: its first SHORT_ID characters, more if another
        message's id starts the same."""
        keys = sorted({e.key for e in self.entries()})
        out: dict[str, str] = {}
        for i, key in enumerate(keys):
            common = max((_common(key, keys[j]) for j in (i - 1, i + 1) if 0 <= j < len(keys)),
                         default=0)
            out[key] = key[: max(SHORT_ID, common + 1)]
        return out

    # -- one message --------------------------------------------------------------
    def find(self, given: str) -> MailItem:
        """The message whose id is `given`, or the one whose id starts with it."""
        key = given.strip().removesuffix(".md")
        if not key:
            raise UnknownMessageError("no message id given (hivemind inbox lists them)")
        entries = self.entries()
        exact = [e for e in entries if e.key == key]
        hits = exact or [e for e in entries if e.key.startswith(key)]
        if not hits:
            raise UnknownMessageError(
                f"no message {given!r} in mailboxes/{HUMAN}/ (hivemind inbox lists them)")
        if len(hits) > 1:
            shown = ", ".join(sorted(e.key for e in hits)[:5])
            raise UnknownMessageError(
                f"{given!r} starts the ids of {len(hits)} messages ({shown}"
                f"{', ...' if len(hits) > 5 else ''}); give more of it")
        return self.item(hits[0])

    def item(self, entry: _Entry) -> MailItem:
        """The message in `entry`'s file (kept as raw text, from `unknown`, if unreadable)."""
        data = raw_bytes(entry.path)
        try:
            message = message_from_text(data.decode("utf-8"), entry.path)
        except (UnicodeDecodeError, FileFormatError) as exc:
            reason = exc.reason if isinstance(exc, FileFormatError) else "not UTF-8 text"
            message = raw_message(entry.path, HUMAN, reason, data)
        return MailItem(message, entry.path, entry.read)

    def mark_read(self, item: MailItem) -> None:
        """Move it from new/ to cur/ (nothing if it is read already)."""
        if not item.read:
            self.box.mark_read(item)
            self._entries = None

    def reply(self, item: MailItem, text: str) -> Path:
        """Send `text` to the sender of `item`, in its thread; the file written."""
        sender = item.message.from_
        if sender == HUMAN:
            raise UserError(f"{item.message.id} is from you ({HUMAN}): there is no one to "
                            "answer; send a new message with `hivemind send`")
        if not self.hive.is_agent(sender):
            agents = ", ".join(self.hive.agent_names()) or "none"
            raise UserError(f"{item.message.id} is from {sender!r}, which is no agent of this "
                            f"hive (agents: {agents}); send a new message with "
                            "`hivemind send --to AGENT`")
        subject = item.message.subject.strip()
        if subject and not subject.lower().startswith("re:"):
            subject = f"Re: {subject}"
        fields = {"in_reply_to": item.message.id,
                  "thread": item.message.thread or item.message.id}
        if item.message.task:
            fields["task"] = item.message.task
        [path] = PostOffice(self.hive).send(HUMAN, sender, subject, text, **fields)
        return path



def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _newest_first(item: MailItem) -> tuple[float, str]:
    sent = item.message.sent_at
    when = sent.timestamp() if sent is not None else _mtime(item.path)
    return -when, item.path.name


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
