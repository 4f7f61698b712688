"""A server's stderr: its last lines kept for `status`, the rest in a bounded log file.

A stdio server writes its stderr into a pipe that a thread of ours drains, so the
server never blocks on a full pipe and never prints on the daemon's console; one
thread appends to the log files, in order, off the event loop. The log file (when the pool is
given a folder) is capped: past `MAX_LOG_BYTES` it moves to `<name>.log.1`.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import os
import queue
import stat
import threading
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import IO

from hivemind.clock import utcnow
from hivemind.mcp.leash import EXIT_MARK, PID_MARK
from hivemind.printable import printable

MAX_LOG_BYTES = 1_000_000
TAIL_LINES = 20
LINE_CHARS = 300  # a line kept in memory is cut to this
_READ = 65_536


CURRENT: ContextVar[ServerLog | None] = ContextVar("mcp_server_log", default=None)
"""The log of the server whose session this task (and the SDK's tasks under it) runs."""


class _SdkRecords(logging.Handler):
    """The SDK's own warnings (a line on stdout that is not JSON, a session that would
    not end) go to the log of the server they are about, never to the console."""

    def emit(self, record: logging.LogRecord) -> None:
        log = CURRENT.get()
        if log is None:
            return
        said = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            said += f": {type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        log.note(f"mcp sdk {record.levelname.lower()}: {' '.join(said.split())[:1000]}")


def keep_sdk_records() -> None:
    """Route the `mcp` SDK's log records into the servers' logs (once per process)."""
    sdk = logging.getLogger("mcp")
    if not any(isinstance(h, _SdkRecords) for h in sdk.handlers):
        sdk.addHandler(_SdkRecords(logging.WARNING))
        sdk.propagate = False


class ServerLog:
    """One server's stderr over its restarts: the tail in memory, the log on disk."""

    def __init__(self, name: str, path: Path | None) -> None:
        self.name = name
        self.path = path
        self.tail: deque[tuple[int, str]] = deque(maxlen=TAIL_LINES)
        self.lines = 0
        """Lines read so far, over every run (a run's lines are those past its start)."""
        self._lock = threading.Lock()

    def last_line(self, since: int = 0) -> str | None:
        """What the server printed last (a line with some text) after line `since`."""
        with self._lock:
            for number, line in reversed(self.tail):
                if number <= since:
                    break
                if line.strip():
                    return line.strip()
        return None

    def note(self, text: str) -> None:
        """A line of our own in the log (a start, an exit), not in the tail."""
        self._write(f"--- {utcnow().isoformat(timespec='seconds')} {text}\n")

    def open_pipe(self) -> StderrPipe:
        """A new pipe for a server's stderr, drained into this log."""
        return StderrPipe(self)

    def _line(self, line: str) -> None:
        with self._lock:
            self.lines += 1
            self.tail.append((self.lines, line[:LINE_CHARS]))

    def _write(self, text: str) -> None:
        if self.path is not None:
            _writer().put((self.path, text))


def flush() -> None:
    """Wait until every log line written so far is in its file."""
    _WRITES.join()


_WRITES: queue.Queue[tuple[Path, str]] = queue.Queue()
_writer_lock = threading.Lock()
_writer_thread: threading.Thread | None = None


def _writer() -> queue.Queue[tuple[Path, str]]:
    """The queue of log writes; one thread appends them, in order, off the event loop."""
    global _writer_thread
    with _writer_lock:
        if _writer_thread is None or not _writer_thread.is_alive():
            _writer_thread = threading.Thread(target=_append_all, name="mcp-logs",
                                              daemon=True)
            _writer_thread.start()
    return _WRITES


def _append_all() -> None:
    while True:
        path, text = _WRITES.get()
        try:
            with contextlib.suppress(OSError):  # a full disk must not stop the server
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.exists() and path.stat().st_size > MAX_LOG_BYTES:
                    os.replace(path, path.with_name(path.name + ".1"))
                _append(path, text)
        finally:
            _WRITES.task_done()


def _append(path: Path, text: str) -> None:
    """Append to a regular file only: a link there (a cloned hive's, to a file of the
    user's) is not followed, a FIFO not waited on."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                 | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as out:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        out.write(text)


class StderrPipe:
    """The pipe one server process writes its stderr into, and the thread draining it.

    `writer` goes to the child; call `spawned()` once it runs (our copy of the write
    end is closed, so the pipe ends when the server and its children are gone). The
    leash's lines (the server's pid and process group, its exit code) are read here
    and kept out of the log.
    """

    def __init__(self, log: ServerLog) -> None:
        self.log = log
        read_fd, write_fd = os.pipe()
        self.writer: IO[str] = os.fdopen(write_fd, "w")
        self._reader = read_fd
        self.pid: int | None = None
        self.group: int | None = None
        self.exit_code: int | None = None
        """How the server ended, as the leash saw it (negative: killed by that signal)."""
        self.ended = threading.Event()
        self.exit_seen = threading.Event()
        """The server's last stderr line is in: the leash said it exited, or the pipe
        ended."""
        self.on_exit: Callable[[], object] | None = None
        """Called (on the draining thread) when the leash says the server exited."""
        self._thread = threading.Thread(target=self._drain, name=f"mcp-{log.name}-stderr",
                                        daemon=True)
        self._thread.start()

    def spawned(self) -> None:
        with contextlib.suppress(OSError):
            self.writer.close()

    def _drain(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        partial = ""
        try:
            while chunk := os.read(self._reader, _READ):
                lines = (partial + decoder.decode(chunk)).split("\n")
                partial = lines.pop()[-LINE_CHARS * 4:]  # a never-ending line stays bounded
                self._lines(lines)
            self._lines([partial + decoder.decode(b"", final=True)])
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self._reader)
            self.ended.set()
            self.exit_seen.set()

    def _lines(self, lines: list[str]) -> None:
        leash = [line for line in lines if line.startswith((PID_MARK, EXIT_MARK))]
        kept = [printable(line) for line in lines if line and line not in leash]
        for line in kept:
            self.log._line(line)
        if kept:
            self.log._write("".join(f"{line}\n" for line in kept))
        for line in leash:  # after the lines before it: an exit is said once they are in
            self._leash_said(line)

    def _leash_said(self, line: str) -> bool:
        with contextlib.suppress(ValueError, IndexError):
            if line.startswith(PID_MARK):
                words = line[len(PID_MARK):].split()
                self.pid, self.group = int(words[0]), int(words[2])
                return True
            if line.startswith(EXIT_MARK):
                self.exit_code = int(line[len(EXIT_MARK):])
                self.exit_seen.set()
                if self.on_exit is not None:
                    with contextlib.suppress(RuntimeError):  # the daemon's loop is closed
                        self.on_exit()
                return True
        return False
