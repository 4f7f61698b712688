"""Maildir mailboxes: mailboxes/<name>/{tmp,new,cur}/, one per agent and one for `human`.

A delivery is written in tmp/, fsynced, then linked into new/ (atomic; a file in
new/ is always whole). A message moves to cur/ only when the cycle that saw it is
over, so a crash means it is seen again, never missed. Unparsable files are still
messages (raw text, from `unknown`): nothing in a mailbox is lost.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import secrets
import stat
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from hivemind.clock import utcnow
from hivemind.errors import FileFormatError, UnknownAgentError, UserError
from hivemind.fs.atomic import fsync_dir, write_temp
from hivemind.fs.filenames import NOT_UTF8, fitted, is_utf8, safe, shown
from hivemind.fs.flush import fsync_all
from hivemind.fs.noreplace import link_new, move_unique
from hivemind.fs.sayonce import warn_once
from hivemind.fs.settling import writer_open
from hivemind.fs.statcache import StatCache
from hivemind.fs.steps import Steps, run
from hivemind.hive.document import read_text
from hivemind.hive.frontmatter import MAX_FILE_BYTES, message_from_text, render_message
from hivemind.hive.layout import HUMAN, Hive, is_temp_name
from hivemind.hive.models import MAX_ID_LENGTH, Message, check_file_id

logger = logging.getLogger(__name__)

BROADCAST = "*"
"""`to: "*"`: every agent and the human, except the sender."""
MAX_BODY_BYTES = MAX_FILE_BYTES - 8_000  # what is left of a message file for its front matter
READ_IDS_KEPT = 100_000  # ids of read messages remembered per mailbox (see Mailbox)

_id_lock = threading.Lock()
_id_seq = itertools.count()
_id_last_us = 0


def new_message_id() -> str:
    """A unique id that sorts by time across processes: `20261122T012233.123456Z-pid-seq-rand`."""
    global _id_last_us
    with _id_lock:
        # Strictly increasing within a process even if the clock steps back.
        now_us = max(time.time_ns() // 1000, _id_last_us + 1)
        _id_last_us = now_us
        seq = next(_id_seq) & 0xFFFFFF
    stamp = f"{_second_stamp(now_us // 1_000_000)}.{now_us % 1_000_000:06d}Z"
    # pid + seq is unique among live processes; the salt, drawn once per process,
    # covers a pid reused later.
    return f"{stamp}-{os.getpid():06x}-{seq:06x}-{_id_salt}"


_id_salt = secrets.token_hex(3)


@lru_cache(maxsize=4)
def _second_stamp(second: int) -> str:
    return f"{datetime.fromtimestamp(second, UTC):%Y%m%dT%H%M%S}"


@dataclass
class MailItem:
    """A message and its file; `read` = it is in cur/."""

    message: Message
    path: Path
    read: bool = False
    read_at: float | None = None  # when it moved to cur/ (the file's ctime), if read
    inode: int | None = None  # of its file when listed: found by it in cur/ if moved by another


@dataclass(frozen=True)
class Staged:
    """A message written and fsynced in tmp/, not yet visible in new/. `fresh`: its id
    was made for this delivery, so no copy can be in new/ or cur/ already."""

    tmp: Path
    name: str
    fresh: bool = False


def _order(item: MailItem, mtime: float) -> tuple[float, str]:
    sent = item.message.sent_at
    if sent is not None:
        sent = sent if sent.tzinfo else sent.replace(tzinfo=UTC)
        return sent.timestamp(), item.path.name
    return mtime, item.path.name


class Mailbox:
    """One maildir. `settle_time` > 0 skips files in new/ changed that recently
    (for people who write into new/ directly rather than through tmp/)."""

    def __init__(
        self, hive: Hive, name: str, *, settle_time: float = 0.0, fsync: bool = True
    ) -> None:
        try:
            check_file_id(name)
        except ValueError as exc:
            raise UserError(f"mailbox name: {exc}") from None
        self.hive = hive
        self.name = name
        self.dir = hive.mailbox_dir(name)
        self.settle_time = settle_time
        self.fsync = fsync
        self._parsed: StatCache[Message] = StatCache(read_text)
        # Ids of the messages this mailbox moved to cur/: a file in new/ that has one is
        # another message (a reused name or `id:`), so it is read under a fresh id. The
        # newest READ_IDS_KEPT (insertion-ordered): a daemon running for months must not
        # grow it for ever, and an id reused after that many messages is long out of view.
        self._read_ids: dict[str, None] = {}
        self._told: set[str] = set()  # names not UTF-8 that could not be renamed
        self._unmoved: set[tuple[str, str]] = set()  # (name, why) told not marked read
        self.problem: str | None = None  # the last message that could not be marked read

    def __repr__(self) -> str:
        return f"Mailbox({self.name!r})"

    @cached_property
    def tmp_dir(self) -> Path:
        return self.dir / "tmp"

    @cached_property
    def new_dir(self) -> Path:
        return self.dir / "new"

    @cached_property
    def cur_dir(self) -> Path:
        return self.dir / "cur"

    def ensure(self) -> Mailbox:
        """Create tmp/, new/ and cur/ if missing."""
        for folder in (self.tmp_dir, self.new_dir, self.cur_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return self

    # -- delivering --------------------------------------------------------------
    def has(self, message_id: str) -> bool:
        """True if a message with this id is in new/ or cur/."""
        name = f"{message_id}.md"
        return os.path.lexists(os.path.join(self.new_dir, name)) or os.path.lexists(
            os.path.join(self.cur_dir, name)
        )

    def stage(
        self, message: Message, *, fsync: bool | None = None, fresh: bool = False
    ) -> Staged:
        """Step 1 of a delivery: the whole file in tmp/ (fsynced unless told not to)."""
        name = f"{message.id}.md"
        data = render_message(message).encode("utf-8")
        sync = self.fsync if fsync is None else fsync
        try:
            return Staged(write_temp(self.tmp_dir, name, data, fsync=sync), name, fresh)
        except FileNotFoundError:  # first delivery: the maildir does not exist yet
            self.ensure()
            return Staged(write_temp(self.tmp_dir, name, data, fsync=sync), name, fresh)

    def commit(self, staged: Staged) -> Path | None:
        """Step 2: link into new/ (never replacing); None if the id was already delivered."""
        target = self.new_dir / staged.name
        linked = False
        try:
            if not staged.fresh and os.path.lexists(os.path.join(self.cur_dir, staged.name)):
                return None
            try:
                linked = link_new(staged.tmp, target)
            except FileNotFoundError:
                if not staged.tmp.exists():
                    raise
                self.ensure()  # new/ was removed by hand
                linked = link_new(staged.tmp, target)
            return target if linked else None
        finally:
            if not linked:  # a link moved it already; otherwise the temp file goes
                staged.tmp.unlink(missing_ok=True)

    def deliver(self, message: Message) -> Path | None:
        """Deliver atomically; a message id already in new/ or cur/ is not delivered again."""
        if self.has(message.id):
            return None
        return self.commit(self.stage(message))

    def deliver_many(self, messages: list[Message]) -> list[Path | None]:
        """Deliver a batch: files fsynced together, then linked, then new/ fsynced once."""
        staged = {
            i: self.stage(m, fsync=False) for i, m in enumerate(messages) if not self.has(m.id)
        }
        if self.fsync:
            fsync_all([s.tmp for s in staged.values()])
        out = [self.commit(staged[i]) if i in staged else None for i in range(len(messages))]
        if self.fsync and any(out):
            fsync_dir(self.new_dir)
        return out

    # -- reading -------------------------------------------------------------------
    def _parse(self, text: str, path: Path) -> Message:
        try:
            return message_from_text(text, path)
        except FileFormatError as exc:
            return raw_message(path, self.name, exc.reason, text.encode("utf-8"))

    def _read(self, path: Path, st: os.stat_result) -> Message:
        read_at = time.time()
        try:
            return self._parsed.load(path, st, self._parse)
        except FileFormatError as exc:  # no text at all (empty, not UTF-8, too big)
            return self._parsed.remember(path, st, raw_message(path, self.name, exc.reason),
                                         read_at)

    def _items(self, folder: Path, read: bool) -> list[tuple[MailItem, float]]:
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):  # no folder, or a file in its place
            return []
        now = time.time()
        out = []
        for entry in entries:
            if is_temp_name(entry.name):
                continue
            path = Path(entry.path)
            try:
                if is_utf8(entry.name):
                    st = entry.stat(follow_symlinks=False)
                else:
                    renamed = self._renamed(path)
                    if renamed is None:
                        continue
                    path, st = renamed, os.lstat(renamed)
                if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                    # A symlink or a hard link could pull a file from outside the hive
                    # into a prompt (a delivery's own link lasts a moment: seen next look).
                    warn_once(logger, (path, st.st_ino, "not regular"),
                              "%s: not a regular file; not read as mail", path)
                    continue
                if not read and self.settle_time > 0 and now - st.st_mtime < self.settle_time:
                    continue
                if not read and writer_open(path):
                    continue  # written in new/ by hand, and not closed yet: read when whole
                message = self._read(path, st)
                if not read and message.id in self._read_ids:
                    message = message.model_copy(update={"id": self._fresh_id(message.id, st)})
                item = MailItem(message, path, read, st.st_ctime if read else None, st.st_ino)
                out.append((item, st.st_mtime))
            except FileNotFoundError:
                continue  # marked read meanwhile
        return out

    def _renamed(self, path: Path) -> Path | None:
        """A message whose file name is not UTF-8, renamed in its folder to a valid name
        (never replacing a file): its name is its id, and the id goes into blocks,
        records and requests that cannot hold such a name. None: it cannot be read."""
        try:
            target = move_unique(path, path.parent, safe(path.name, limit=240))
        except FileNotFoundError:
            return None  # marked read or removed meanwhile
        except OSError as exc:  # a hive this user may not write: left as it is
            if path.name not in self._told:
                self._told.add(path.name)
                logger.warning("%s: %s and it cannot be renamed (%s); not read",
                               shown(self.hive.relative(path)), NOT_UTF8, exc.strerror)
            return None
        logger.warning("%s: %s; renamed to %s", shown(self.hive.relative(path)), NOT_UTF8,
                       target.name)
        return target

    def _fresh_id(self, message_id: str, st: os.stat_result) -> str:
        """The id a message is read under when its id was already read from another file:
        made from this file's identity, so it stays the same while the file does."""
        n = 0
        while True:
            key = f"{message_id}:{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{n}"
            tag = hashlib.sha256(key.encode("utf-8")).hexdigest()[:10]
            fresh = f"{message_id[: MAX_ID_LENGTH - len(tag) - 1]}-{tag}"
            if fresh not in self._read_ids:  # (moved back from cur/ after being read)
                return fresh
            n += 1

    def unread(self) -> list[MailItem]:
        """Messages in new/, oldest first."""
        items = self._items(self.new_dir, read=False)
        self._parsed.keep_only(self.new_dir, (item.path for item, _ in items))
        return [item for item, mtime in sorted(items, key=lambda pair: _order(*pair))]

    def read_items(self, limit: int = 20) -> list[MailItem]:
        """The `limit` most recent read messages (cur/), oldest first."""
        items = sorted(self._items(self.cur_dir, read=True), key=lambda pair: _order(*pair))
        return [item for item, _ in items[-limit:]] if limit > 0 else []

    def count_unread(self) -> int:
        """Files waiting in new/ (without parsing them)."""
        try:
            return sum(1 for e in os.scandir(self.new_dir) if not is_temp_name(e.name))
        except (FileNotFoundError, NotADirectoryError):
            return 0

    def mark_read(self, item: MailItem) -> Path:
        """Move the message from new/ to cur/, never replacing a message there (a name
        already taken gets `-1`, `-2`...); idempotent. A failure is logged, not raised:
        the message stays unread, its path as it was, and the caller goes on."""
        if item.path.parent == self.cur_dir:
            return item.path
        try:
            target = self._move(item.path)
        except FileNotFoundError:
            found = self._moved_already(item)
            if found is None:
                return self._not_moved(item, "it is no longer in new/ or cur/")
            target = found
        except OSError as exc:
            why = exc.strerror or str(exc)
            return self._not_moved(item, f"it cannot move to cur/ ({why}); it stays in new/")
        self._read_ids[item.message.id] = None
        if len(self._read_ids) > READ_IDS_KEPT:
            del self._read_ids[next(iter(self._read_ids))]
        self._parsed.forget(item.path)
        item.path, item.read = target, True
        return target

    def _moved_already(self, item: MailItem) -> Path | None:
        """Where another Mailbox or process moved `item` in cur/: the first of the names
        `move_unique` tries that holds its file (its inode; unknown, its message id)."""
        name = item.path.name
        for n in range(10_000):
            path = self.cur_dir / (name if n == 0 else fitted(name, tag=f"-{n}"))
            try:
                st = os.lstat(path)
                if item.inode is not None:
                    if st.st_ino == item.inode:
                        return path
                elif stat.S_ISREG(st.st_mode) and self._read(path, st).id == item.message.id:
                    return path
            except (FileNotFoundError, NotADirectoryError):
                return None  # a free name: the move took it or one before it
            except OSError:
                continue
        return None

    def _not_moved(self, item: MailItem, why: str) -> Path:
        """Log, once for each name and reason, that `item` was not marked read (and keep
        it as `problem`, for the agent's status); its path."""
        self.problem = f"{shown(self.hive.relative(item.path))}: not marked read: {why}"
        if (item.path.name, why) not in self._unmoved:
            self._unmoved.add((item.path.name, why))
            logger.warning("%s", self.problem)
        return item.path

    def _move(self, src: Path) -> Path:
        try:
            return move_unique(src, self.cur_dir)
        except FileNotFoundError:
            if self.cur_dir.is_dir() or not os.path.lexists(src):
                raise
            self.cur_dir.mkdir(parents=True, exist_ok=True)  # cur/ removed by hand
            return move_unique(src, self.cur_dir)


def raw_message(
    path: Path, owner: str, reason: str | None = None, data: bytes | None = None
) -> Message:
    """A file that is not a valid message, kept as one: raw text (`data`, else read
    from `path`), from `unknown`."""
    if data is None:
        data = raw_bytes(path)
    extra: dict[str, Any] = {"error": reason} if reason else {}
    try:
        message_id = check_file_id(path.stem)
    except ValueError:
        # Named after the file: the same message keeps its id from one look to the next.
        message_id = f"raw-{hashlib.sha256(os.fsencode(path.name)).hexdigest()[:12]}"
    return Message(
        id=message_id, to=owner, body=data.decode("utf-8", errors="replace"), extra=extra
    )


def raw_bytes(path: Path) -> bytes:
    """The head of a regular, single-named file; nothing for anything else. Never read
    through a link put in the message's place since it was looked at, nor from a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            return b""
        return f.read(MAX_FILE_BYTES)


class PostOffice:
    """Sends messages: sets `from`, `sent_at` and the id; one copy per recipient."""

    def __init__(self, hive: Hive, *, fsync: bool = True, sync_dirs: bool = False) -> None:
        self.hive = hive
        self.fsync = fsync
        self.sync_dirs = sync_dirs
        self._boxes: dict[str, Mailbox] = {}

    def mailbox(self, name: str) -> Mailbox:
        """The mailbox of an agent or of `human` (created on first delivery)."""
        box = self._boxes.get(name)
        if box is None:
            box = self._boxes[name] = Mailbox(self.hive, name, fsync=self.fsync)
        return box

    def recipients(self, sender: str, to: str | list[str]) -> list[str]:
        """Expand `*` and check every name is an agent or `human`."""
        wanted = [to] if isinstance(to, str) else list(to)
        out: list[str] = []
        for name in wanted:
            if name == BROADCAST:
                names = [n for n in [*self.hive.agent_names(), HUMAN] if n != sender]
            else:
                names = [name]
            for n in names:
                # One stat per named recipient; the full listing only for `*` or an error.
                if n != HUMAN and not self.hive.is_agent(n):
                    listed = ", ".join(self.hive.agent_names()) or "none yet"
                    raise UnknownAgentError(
                        f"unknown recipient {n!r} (agents: {listed}; or {HUMAN}, "
                        f"or {BROADCAST} for everyone)"
                    )
                if n not in out:
                    out.append(n)
        return out

    def send(
        self,
        sender: str,
        to: str | list[str],
        subject: str = "",
        body: str = "",
        **fields: Any,
    ) -> list[Path]:
        """Deliver one message to each recipient; returns the files written in new/."""
        return run(self.send_steps(sender, to, subject, body, **fields))

    def send_steps(
        self,
        sender: str,
        to: str | list[str],
        subject: str = "",
        body: str = "",
        **fields: Any,
    ) -> Steps[list[Path]]:
        """`send` as a durable operation (see `steps.run_async`)."""
        if (size := len((subject + body).encode("utf-8", "surrogatepass"))) > MAX_BODY_BYTES:
            # Its file would be past what a reader reads (it became a raw message: no
            # sender, no subject, cut): refused here instead.
            raise UserError(
                f"the message is {size:,} bytes; the most a message holds is "
                f"{MAX_BODY_BYTES:,}: write the long part to a file of workspace/ and send "
                "its path"
            )
        names = self.recipients(sender, to)
        known = {k: v for k, v in fields.items() if k in ("id", "thread", "in_reply_to", "task")}
        extra = {k: v for k, v in fields.items() if k not in known}
        given = known.pop("id", None)
        message_id = given or new_message_id()
        sent_at = utcnow()
        staged: list[tuple[Mailbox, Staged]] = []
        try:
            for name in names:
                box = self.mailbox(name)
                if given and box.has(message_id):
                    continue
                message = Message(
                    id=message_id, from_=sender, to=name, subject=subject, sent_at=sent_at,
                    # The file ends with a newline of its own (`render`), not a blank line.
                    body=body.removesuffix("\n"), extra=extra, **known,
                )  # fmt: skip
                staged.append((box, box.stage(message, fsync=False, fresh=not given)))
            if self.fsync and staged:  # every copy reaches the disk before any is visible
                yield [s.tmp for _, s in staged]
        except BaseException:
            for _, s in staged:
                s.tmp.unlink(missing_ok=True)
            raise
        delivered = [p for box, s in staged if (p := box.commit(s)) is not None]
        if self.sync_dirs:
            for folder in {p.parent for p in delivered}:
                fsync_dir(folder)
        return delivered
