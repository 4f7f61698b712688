"""Bad input, generated: task files, messages, ROM.md edits and hive.toml files.

Random bytes, invalid and hostile YAML (alias bombs, huge scalars, deep
nesting, tags), wrong types, non-UTF-8, empty and enormous (> 1 MB) files,
strange names (spaces, unicode, leading dots, very long), folders and
symlinks and FIFOs where files are expected. The properties:

- tasks: a dropped file is either a valid pending task (left as it is, and it
  can be claimed and completed) or moved whole, byte for byte, to
  tasks/rejected/ with a one-line `.reason`; temp names are never touched;
- messages: every regular file in new/ is read as mail (raw if unparsable),
  unchanged, and moves to cur/ unchanged; anything else is left alone;
- ROM.md: a bad edit keeps the last good config and says why in one line;
- hive.toml: loads, or fails with one `ConfigError` line; the CLI prints one
  line and no traceback (checked by running it);
- the daemon: a batch of all of the above dropped into a running hive, which
  stays up, finishes the good tasks and accounts for every file.

Most cases drive the parsing/board/quarantine layer directly (fast); the
daemon and CLI cases run the real thing.

    python bench/fuzz_harness.py            # >= 10 000 generated cases
    python bench/fuzz_harness.py --quick    # about 1 000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.errors import ConfigError, FileFormatError
from hivemind.fs.regular import SETTINGS_FILE_LIMIT
from hivemind.hive.config import load_hive_config
from hivemind.hive.document import MAX_FILE_BYTES
from hivemind.hive.frontmatter import read_rom, read_task
from hivemind.hive.layout import Hive, is_temp_name
from hivemind.hive.mailbox import Mailbox
from hivemind.hive.quarantine import REASON_SUFFIX
from hivemind.hive.rom import RomRegistry
from hivemind.hive.tasks.board import TaskBoard
from hivemind.hive.tasks.pending import EMPTY_GRACE
from hivemind.llm.offline import OfflineProvider
from hivemind.settings import AgentSettings

NAME_MAX = 255  # bytes in one file name (Linux)

# -- strategies -----------------------------------------------------------------------

TASK_FIELDS = ["id", "title", "assignee", "priority", "project", "domain", "task_type",
               "depends_on", "reply_to", "max_attempts", "attempts", "status", "agent",
               "created_by", "created_at", "claimed_at", "finished_at", "colour"]
MESSAGE_FIELDS = ["id", "from", "to", "subject", "sent_at", "thread", "in_reply_to", "task"]
ROM_FIELDS = ["role", "model", "max_context_tokens", "max_output_tokens", "temperature",
              "heartbeat", "skills", "tools", "knowledge", "watch", "budget", "retrieval",
              "max_steps", "accepts_unassigned", "name", "instructions", "bogus"]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.dates(), st.datetimes(),
    st.sampled_from(["high", "low", "critical", "urgent", "..", "../x", ".hidden", "a/b",
                     "human", "*", "worker", "", " ", "~", "null", "yes", "0x1F", "1e400"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=10,
)


def front_matter(fields: list[str]) -> st.SearchStrategy[str]:
    """A YAML front matter of known (and unknown) fields with values of any type."""
    mapping = st.dictionaries(st.sampled_from(fields) | st.text(max_size=10), values, max_size=6)
    return mapping.map(lambda d: yaml.safe_dump(d, allow_unicode=True, default_flow_style=None))


def alias_bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


hostile_yaml = st.one_of(
    st.integers(2, 12).map(alias_bomb),
    st.integers(1, 3_000_000).map(lambda n: "title: " + "x" * n + "\n"),
    st.integers(10, 20_000).map(lambda n: "depends_on: " + "[" * n + "]" * n + "\n"),
    st.integers(10, 2_000).map(lambda n: "".join(f"{'  ' * i}k{i}:\n" for i in range(n))),
    st.integers(10, 5_000).map(lambda n: "title: " + "{a: " * n + "1" + "}" * n + "\n"),
    st.sampled_from([
        "title: !!python/object/apply:os.system ['echo pwned']\n",
        "id: !!binary aGVsbG8=\n",
        "? [a, b]\n: c\n",
        "? {a: 1}\n: c\n",
        "1: one\n2: two\n",
        "id: x\nid: y\n",
        "<<: {title: merged}\n",
        "a: &x 1\nb: *x\n",
        "title: 'unclosed\n",
        "title: [unclosed\n",
        "- a\n- b\n",
        "just a scalar\n",
        "created_at: 2026-13-45\n",
        "created_at: 2026-02-30T25:61:00\n",
        "priority: !custom high\n",
        "%YAML 1.1\n---\ntitle: x\n",
        "title: x\n...\nmore: y\n",
        "\t title: tabbed\n",
        "id: \x00nul\n",
        "id: \ud800\n".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    ]),
)

bodies = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["# Title\n\nbody\n", "## Result\n\nalready\n", "---\n", "---\n---\n",
                     "\r\n# crlf\r\n", "\x00\x01binary\n", "\ufeff# bom\n"]),
)


def document(fields: list[str]) -> st.SearchStrategy[bytes]:
    """Markdown with a front matter block (valid, wrong, hostile) as UTF-8 bytes."""
    front = front_matter(fields) | hostile_yaml
    closed = st.tuples(front, bodies).map(lambda fb: f"---\n{fb[0]}---\n{fb[1]}")
    unclosed = st.tuples(front, bodies).map(lambda fb: f"---\n{fb[0]}{fb[1]}")
    plain = bodies
    return st.one_of(closed, closed, unclosed, plain).map(lambda s: s.encode("utf-8", "replace"))


def file_bytes(fields: list[str]) -> st.SearchStrategy[bytes]:
    """Any content a person (or a broken program) might leave in a file."""
    return st.one_of(
        document(fields),
        document(fields),
        st.binary(max_size=2_000),
        st.text(max_size=200).map(lambda s: s.encode("utf-16")),
        st.text(max_size=200).map(lambda s: s.encode("latin-1", "replace") + b"\xe9\xff"),
        st.sampled_from([b"", b"   \n\n", b"\xef\xbb\xbf", b"\x00" * 64, b"---", b"---\n",
                         b"---\r\nid: crlf\r\n---\r\nbody\r\n"]),
        st.integers(MAX_FILE_BYTES - 2, MAX_FILE_BYTES + 50_000).map(
            lambda n: b"# big\n" + b"x" * n
        ),
        document(fields).map(lambda b: b"\xef\xbb\xbf" + b),
    )


def _fits(name: str) -> bool:
    raw = name.encode("utf-8", "surrogateescape")
    return 0 < len(raw) <= NAME_MAX and name not in (".", "..")


name_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00")
file_names = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,30}\.md", fullmatch=True),
    st.text(name_chars, min_size=1, max_size=60).map(lambda s: s + ".md"),
    st.text(name_chars, min_size=1, max_size=30).map(lambda s: "." + s + ".md"),
    st.text(name_chars, min_size=1, max_size=30),
    st.sampled_from(["with space.md", " lead.md", "trail .md", "émoji-🐝.md", "x.md~",
                     "#x.md#", "x.swp", "x.md.tmp", "UPPER.MD", "a.b.c.md", "-dash.md",
                     "new.md", "rejected.md", "x.reason", "x.md.reason"]),
    st.integers(150, 252).map(lambda n: "a" * n + ".md"),
    st.integers(40, 84).map(lambda n: "é" * n + ".md"),
).filter(_fits)

KINDS = ["file"] * 12 + ["dir", "symlink-out", "symlink-in", "dangling", "fifo"]
kinds = st.sampled_from(KINDS)


# -- making files ------------------------------------------------------------------------


def place(path: Path, data: bytes, kind: str, outside: Path) -> None:
    """Create `path` as a file of `data`, or a folder / symlink / FIFO."""
    if kind == "file":
        path.write_bytes(data)
    elif kind == "dir":
        path.mkdir()
        (path / "inside.md").write_bytes(data)
    elif kind == "symlink-out":
        outside.write_bytes(data)
        path.symlink_to(outside)
    elif kind == "symlink-in":
        inside = path.parent.parent / "elsewhere.bin"
        inside.write_bytes(data)
        path.symlink_to(inside)
    elif kind == "dangling":
        path.symlink_to(path.parent / "no-such-target")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        raise ValueError(kind)


def snapshot(path: Path) -> tuple[str, bytes]:
    """What a path is, for 'unchanged' checks: the kind and the bytes (or link target)."""
    st_ = os.lstat(path)
    if stat.S_ISLNK(st_.st_mode):
        return "link", os.readlink(path).encode("utf-8", "surrogateescape")
    if stat.S_ISDIR(st_.st_mode):
        return "dir", b""
    if stat.S_ISFIFO(st_.st_mode):
        return "fifo", b""
    return "file", path.read_bytes()


def check_reason(reason_path: Path) -> str:
    text = reason_path.read_text("utf-8")
    line = text.removesuffix("\n")
    assert line.strip(), f"empty reason in {reason_path.name}"
    assert "\n" not in line and "\r" not in line, f"reason is not one line: {text!r}"
    assert len(line) < 1_000, f"reason too long ({len(line)} chars)"
    return line


def rejected_entries(hive: Hive) -> list[Path]:
    if not hive.rejected_dir.is_dir():
        return []
    return sorted(p for p in hive.rejected_dir.iterdir()
                  if not p.name.endswith(REASON_SUFFIX) and not p.name.startswith("."))


# -- properties (each raises AssertionError when broken) ----------------------------------


def check_task_drop(root: Path, name: str, data: bytes, kind: str) -> None:
    """A file dropped into tasks/ is a valid pending task, or is rejected whole; never lost."""
    hive = Hive(root).ensure()
    path = hive.tasks_dir / name
    place(path, data, kind, root / "outside.bin")
    before = snapshot(path)
    board = TaskBoard(hive, settle_time=0, fsync=False)
    refs = board.scan_pending()
    ignored = is_temp_name(name) or not name.endswith(".md") or kind == "dir"
    if not ignored and kind == "file" and data == b"":
        # An empty file is given time to be written: left as it is, then rejected.
        assert refs == [] and snapshot(path) == before, "a fresh empty file was not left"
        old = time.time() - EMPTY_GRACE - 1
        os.utime(path, (old, old))
        before = snapshot(path)
        refs = board.scan_pending()
    if ignored:
        assert refs == [], f"{name!r} should be ignored"
        assert snapshot(path) == before, "an ignored file was changed"
        assert rejected_entries(hive) == []
        return
    if refs:
        [ref] = refs
        assert kind == "file", f"a {kind} was read as a task"
        assert ref.path == path and snapshot(path) == before, "a pending task was changed"
        assert read_task(path) == ref.task
        _claim_and_complete(hive, board, ref)
        return
    assert not os.path.lexists(path), f"{name!r} neither read nor rejected"
    [moved] = rejected_entries(hive)
    assert snapshot(moved) == before, "the rejected file is not the original"
    check_reason(moved.with_name(moved.name + REASON_SUFFIX))
    if kind == "file" and len(data) <= MAX_FILE_BYTES:
        with contextlib.suppress(FileFormatError):  # rejected: it must not parse
            read_task(moved)
            raise AssertionError("a valid task file was rejected")


def _claim_and_complete(hive: Hive, board: TaskBoard, ref: Any) -> None:
    got = board.claim(ref, "worker")
    if got is None:
        assert ref.task.depends_on, "a claimable task could not be claimed"
        return
    done = board.complete(got, "the result", "worker")
    back = read_task(done.path)
    assert back.id == ref.task.id and back.title == ref.task.title
    assert back.body.rstrip().endswith("## Result\n\nthe result")
    assert board.counts()[done.state] == 1


def check_message(root: Path, name: str, data: bytes, kind: str) -> None:
    """A file in new/ is read as mail (raw if need be), unchanged, and moves to cur/ unchanged."""
    hive = Hive(root).ensure()
    box = Mailbox(hive, "worker", fsync=False).ensure()
    path = box.new_dir / name
    place(path, data, kind, root / "outside.bin")
    before = snapshot(path)
    items = box.unread()
    readable = kind in ("file", "fifo") and not is_temp_name(name)
    if kind == "fifo":
        readable = False
    if not readable:
        assert [i for i in items if i.path == path] == [], f"a {kind} was read as mail"
        assert snapshot(path) == before
        return
    [item] = items
    assert item.path == path and snapshot(path) == before
    assert item.message.to == "worker" or item.message.to
    target = box.mark_read(item)
    assert target.parent == box.cur_dir and snapshot(target) == before
    assert box.unread() == []
    assert [i.path for i in box.read_items()] == [target]


def check_rom_edit(root: Path, data: bytes, kind: str) -> None:
    """A ROM edit is taken when valid; otherwise the last good config stays, with a reason."""
    hive = Hive(root).ensure()
    rom = hive.rom_path("worker")
    rom.parent.mkdir(parents=True)
    rom.write_text("---\nrole: the good one\n---\nBe good.\n")
    registry = RomRegistry(hive, AgentSettings())
    good = registry.load("worker")
    rom.unlink()
    place(rom, data, kind, root / "outside.bin")
    if kind in ("dangling",):
        with contextlib.suppress(Exception):
            registry.load("worker")
        return
    cfg = registry.load("worker")
    try:
        # A ROM.md linked to a file inside the hive is read through the link (settings
        # files: see hive/regular.py); a link out of it, never.
        source = Path(os.path.realpath(rom)) if kind == "symlink-in" else rom
        expected = read_rom(source, "worker", AgentSettings()) if kind != "dir" else None
        if expected is not None and os.stat(rom).st_size > SETTINGS_FILE_LIMIT:
            expected = None  # a ROM is read only up to 256 KB
    except (FileFormatError, OSError):
        expected = None
    if expected is None:
        assert cfg == good, "a bad ROM edit replaced the last good config"
        error = registry.error("worker")
        assert error and "\n" not in error, f"no one-line error: {error!r}"
    else:
        assert cfg == expected and registry.error("worker") is None


def check_hive_toml(root: Path, data: bytes) -> None:
    """hive.toml loads, or fails with one ConfigError line (nothing else escapes)."""
    hive = Hive(root)
    root.mkdir(parents=True)
    hive.config_file.write_bytes(data)
    try:
        load_hive_config(hive)
    except ConfigError as exc:
        assert "\n" not in str(exc).strip(), f"not one line: {exc}"


toml_values = st.one_of(
    st.integers(-5, 10**12).map(str), st.floats(allow_nan=False).map(repr),
    st.sampled_from(['"x"', "true", "[1, 2]", "{a = 1}", '"offline"', '"anthropic"', "-1",
                     "0", "1e999", "nan", '"\\u0000"', "'''multi\nline'''"]),
)
toml_keys = st.sampled_from([
    "agents.model", "agents.max_context_tokens", "agents.heartbeat", "agents.budget",
    "daemon.max_concurrent_calls", "daemon.rescan_interval", "daemon.settle_time",
    "daemon.poll", "provider.name", "provider.timeout", "memory.max_items", "nope.key",
    "daemon.bogus", "pricing.x",
])
toml_files = st.one_of(
    st.lists(st.tuples(toml_keys, toml_values), max_size=6).map(
        lambda kvs: "".join(f"{k} = {v}\n" for k, v in kvs).encode()
    ),
    st.binary(max_size=500),
    st.text(max_size=300).map(lambda s: s.encode("utf-8", "replace")),
    st.sampled_from([b"[daemon\n", b"[[agents]]\n", b"\xff\xfe[daemon]\n", b"a = \n",
                     b"[daemon]\nrescan_interval = 0\n", b"[provider]\nname = \"gpt\"\n",
                     b"daemon = 3\n", b"[agents]\nbudget = {per_day = -1}\n"]),
)


# -- running the properties ----------------------------------------------------------------


@dataclass
class Outcome:
    scenario: str
    tried: int = 0
    failures: int = 0
    detail: list[str] = field(default_factory=list)
    seconds: float = 0.0


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="hm-fuzz-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_property(
    scenario: str,
    check: Callable[..., None],
    strategy: st.SearchStrategy[tuple[Any, ...]],
    examples: int,
    seed: int = 0,
) -> Outcome:
    """Run `check` on `examples` generated cases; a falsified property counts one failure."""
    outcome = Outcome(scenario)
    started = time.monotonic()

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink],
              report_multiple_bugs=False)
    @given(strategy)
    def prop(args: tuple[Any, ...]) -> None:
        outcome.tried += 1
        with scratch() as root:
            check(root / "hive", *args)

    seeded = prop
    with contextlib.suppress(AttributeError):
        from hypothesis import seed as hseed

        seeded = hseed(seed)(prop)
    try:
        seeded()
    except Exception as exc:
        outcome.failures += 1
        outcome.detail.append(f"{type(exc).__name__}: {str(exc)[:500]}")
    outcome.seconds = time.monotonic() - started
    return outcome


PROPERTIES: dict[str, tuple[Callable[..., None], st.SearchStrategy[tuple[Any, ...]]]] = {
    "task files": (check_task_drop, st.tuples(file_names, file_bytes(TASK_FIELDS), kinds)),
    "messages": (check_message, st.tuples(file_names, file_bytes(MESSAGE_FIELDS), kinds)),
    "ROM edits": (check_rom_edit, st.tuples(file_bytes(ROM_FIELDS),
                                            st.sampled_from(["file"] * 8 + ["dir", "symlink-in",
                                                                            "dangling", "fifo"]))),
    "hive.toml": (check_hive_toml, st.tuples(toml_files)),
}


# -- the daemon, with everything at once --------------------------------------------------


@dataclass
class Dropped:
    where: str  # tasks | mail
    name: str
    kind: str
    before: tuple[str, bytes]
    valid: bool


def daemon_case(root: Path, tasks: list[tuple[str, bytes, str]],
                mails: list[tuple[str, bytes, str]], rom_edit: bytes | None) -> int:
    """Drop it all into a hive, run the daemon until idle; returns the cases checked."""
    hive = Hive(root).ensure()
    for agent in ("worker", "helper"):
        rom = hive.rom_path(agent)
        rom.parent.mkdir(parents=True, exist_ok=True)
        rom.write_text(f"---\nrole: {agent}\n---\nDo the tasks.\n")
    for i in range(3):
        (hive.tasks_dir / f"good-{i}.md").write_text(f"# Good {i}\n\nDo it.\n")
    dropped: list[Dropped] = []
    used: set[str] = set()
    for name, data, kind in tasks:
        if name in used or name.startswith("good-"):
            continue
        used.add(name)
        path = hive.tasks_dir / name
        place(path, data, kind, root / f"outside-{len(used)}.bin")
        valid = False
        if kind == "file" and name.endswith(".md") and not is_temp_name(name):
            try:
                read_task(path)
                valid = True
            except FileFormatError:
                pass
        dropped.append(Dropped("tasks", name, kind, snapshot(path), valid))
    box = Mailbox(hive, "worker").ensure()
    for name, data, kind in mails:
        path = box.new_dir / name
        if os.path.lexists(path):
            continue
        place(path, data, kind, root / f"mail-outside-{len(dropped)}.bin")
        dropped.append(Dropped("mail", name, kind, snapshot(path), False))
    config = load_hive_config(hive)
    config.daemon.settle_time = 0.0
    config.daemon.rescan_interval = 0.3
    daemon = Daemon(hive, config, OfflineProvider(),
                    RunOptions(until_idle=True, idle_settle=0.2))

    async def main() -> str:
        run = asyncio.create_task(daemon.run())
        if rom_edit is not None:
            await asyncio.sleep(0.05)
            hive.rom_path("helper").write_bytes(rom_edit)
        return await asyncio.wait_for(run, 60)

    reason = asyncio.run(main())
    assert reason in ("idle", "stalled"), f"the daemon stopped: {reason}"
    for i in range(3):
        assert (hive.done_dir / f"good-{i}.md").is_file(), f"good-{i} not done ({reason})"
    rejected = {snapshot(p): p for p in rejected_entries(hive)}
    for p in rejected.values():
        check_reason(p.with_name(p.name + REASON_SUFFIX))
    for d in dropped:
        if d.where == "tasks":
            _account_task(hive, d, rejected)
        else:
            _account_mail(box, d)
    return len(dropped) + 3 + (rom_edit is not None)


def _account_task(hive: Hive, d: Dropped, rejected: dict[tuple[str, bytes], Path]) -> None:
    path = hive.tasks_dir / d.name
    if is_temp_name(d.name) or not d.name.endswith(".md") or d.kind == "dir":
        assert snapshot(path) == d.before, f"ignored {d.name!r} was changed"
        return
    if d.before in rejected:
        return
    assert d.valid, f"{d.name!r} ({d.kind}) is lost: not pending, not rejected"
    # A valid task: it is on the board somewhere (done, or waiting for its dependencies).
    found = [p for p in hive.tasks_dir.rglob("*.md") if p.name != "inside.md"]
    assert found, f"valid task {d.name!r} is lost"


def _account_mail(box: Mailbox, d: Dropped) -> None:
    new, cur = box.new_dir / d.name, box.cur_dir / d.name
    if os.path.lexists(cur):
        assert snapshot(cur) == d.before, f"mail {d.name!r} changed on its way to cur/"
    else:
        assert os.path.lexists(new) and snapshot(new) == d.before, f"mail {d.name!r} lost"


daemon_batches = st.tuples(
    st.lists(st.tuples(file_names, file_bytes(TASK_FIELDS), kinds), min_size=1, max_size=25),
    st.lists(st.tuples(file_names, file_bytes(MESSAGE_FIELDS), kinds), max_size=10),
    st.none() | file_bytes(ROM_FIELDS),
)


def run_daemon_cases(runs: int, seed: int = 0) -> Outcome:
    outcome = Outcome("daemon, all at once")

    def check(root: Path, tasks: Any, mails: Any, rom: Any) -> None:
        outcome.tried += daemon_case(root, tasks, mails, rom) - 1  # run_property adds one

    counted = run_property("daemon", check, daemon_batches, runs, seed)
    outcome.tried += counted.tried
    outcome.failures, outcome.detail = counted.failures, counted.detail
    outcome.seconds = counted.seconds
    return outcome


# -- the CLI with a bad hive.toml -------------------------------------------------------------

BAD_TOMLS = [b"[daemon\n", b"\xff\xfe[daemon]\n", b"[daemon]\nrescan_interval = 0\n",
             b"[provider]\nname = \"gpt\"\n", b"daemon = 3\n", b"[agents]\nmax_steps = 0\n",
             b"[agents]\nbudget = {per_day = -1}\n", b"nope = 1\n", b"a = \n",
             b"[daemon]\nsettle_time = \"soon\"\n", b"[[daemon]]\n", b"\x00\x01\x02"]


def cli_bad_toml(root: Path, data: bytes) -> None:
    """`hivemind run` on a hive with this hive.toml: exit != 0, one stderr line, no traceback."""
    hive = Hive(root).ensure()
    hive.config_file.write_bytes(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["COLUMNS"] = "80"
    proc = subprocess.run(
        [sys.executable, "-m", "hivemind", "run", str(root), "--until-idle", "--quiet",
         "--offline"],
        check=False, capture_output=True, env=env, timeout=60,
    )
    err = proc.stderr.decode(errors="replace").strip()
    assert proc.returncode != 0, f"started with a bad hive.toml {data!r}"
    assert "Traceback" not in err, err[-800:]
    assert err.count("\n") == 0 and err.startswith("error:"), f"not one line: {err!r}"
    assert "hive.toml" in err, err


def run_cli_cases(count: int) -> Outcome:
    outcome = Outcome("hive.toml via the CLI")
    started = time.monotonic()
    for data in BAD_TOMLS[:count]:
        outcome.tried += 1
        with scratch() as root:
            try:
                cli_bad_toml(root / "hive", data)
            except AssertionError as exc:
                outcome.failures += 1
                outcome.detail.append(str(exc)[:300])
    outcome.seconds = time.monotonic() - started
    return outcome


# -- main -------------------------------------------------------------------------------------


def run_all(quick: bool = False, seed: int = 0) -> list[Outcome]:
    per_layer = 250 if quick else 2_800
    outcomes = [run_property(name, check, strategy, per_layer, seed)
                for name, (check, strategy) in PROPERTIES.items()]
    outcomes.append(run_daemon_cases(4 if quick else 40, seed))
    outcomes.append(run_cli_cases(4 if quick else len(BAD_TOMLS)))
    return outcomes


def main() -> int:
    logging.disable(logging.CRITICAL)  # the warnings about each bad file, thousands of them
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    outcomes = run_all(args.quick, args.seed)
    width = max(len(o.scenario) for o in outcomes)
    print(f"{'scenario':<{width}}  {'cases':>7}  failures")
    for o in outcomes:
        print(f"{o.scenario:<{width}}  {o.tried:>7}  {o.failures}")
        for line in o.detail:
            print(f"    {line}")
    total = sum(o.tried for o in outcomes)
    print(f"{'total':<{width}}  {total:>7}  {sum(o.failures for o in outcomes)}"
          f"   ({time.monotonic() - started:.0f} s)")
    return 1 if any(o.failures for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
