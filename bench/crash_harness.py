"""Crash safety: SIGKILL `hivemind run --until-idle` at random moments, restart, check.

A hive of N tasks, a few agents and some mail from `human`; the daemon runs as
a subprocess (offline provider, or the real anthropic SDK against the fake
Messages API with slow replies), is killed with SIGKILL at seeded random
moments, restarted each time, and finally left to run until idle. Then:

- every task is in tasks/done/ exactly once, with exactly one `## Result`, and
  nowhere else (pending, active, failed, rejected);
- every mailbox file parses, and a message id is in new/ or cur/ exactly once;
- each task's `[done]` notice reached its requester exactly once (the runtime
  sends it under an id fixed by the claim); a message the model sent in a
  cycle a kill cut short may be sent again by the cycle that redoes the work,
  so the offline provider's acknowledgement of a task is allowed once plus
  once per interrupted cycle that carried the task, and its reply to a mail
  once per cycle that saw the mail (ended or cut short);
- every mail `human` dropped for an agent ends in its cur/ exactly once;
- the audit log: every cycle a kill left open (a `cycle_start` without its
  record, counted right after each kill, once the killed daemon's worker
  processes, if it had any, have ended the cycles in hand and exited) gets
  exactly one `interrupted` record on restart, and no cycle number is used twice;
- `.hivemind/memory.db`, if there is one, passes `PRAGMA integrity_check`.

    python bench/crash_harness.py                      # 1 000 tasks, 100 kills, offline
    python bench/crash_harness.py --mode anthropic     # fake Messages API, slow replies
    python bench/crash_harness.py --tasks 100 --kills 10 --seed 7
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")

from hivemind.errors import FileFormatError
from hivemind.hive.frontmatter import read_message, read_task
from hivemind.hive.layout import HUMAN, Hive, is_temp_name

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-ant-crash-harness-key-never-printed"
RESULT = "## Result"


@dataclass
class CrashResult:
    """What one crash run did and what its final check found."""

    mode: str
    tasks: int
    agents: int
    seed: int
    kills: int = 0
    kills_mid_cycle: int = 0
    open_cycles_at_kills: int = 0
    interrupted_records: int = 0
    runs: int = 0
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"ok": self.ok}


# -- the hive -----------------------------------------------------------------


def make_hive(root: Path, tasks: int, agents: int, mails: int) -> Hive:
    """Agents, `tasks` task files (some with a requester) and `mails` from human."""
    hive = Hive(root).ensure()
    hive.config_file.write_text("[daemon]\nrescan_interval = 1.0\n")
    names = [f"agent{i}" for i in range(agents)]
    for name in names:
        rom = hive.rom_path(name)
        rom.parent.mkdir(parents=True)
        rom.write_text(f"---\nrole: worker {name}\n---\nYou are {name}. Do the tasks.\n")
    for t in range(tasks):
        # Some tasks name a requester (an agent or human), who gets a `[done]` notice.
        front = (f"reply_to: {names[t % agents]}\n" if t % 5 == 0
                 else f"reply_to: {HUMAN}\n" if t % 2 == 0 else "")
        (hive.tasks_dir / f"task{t:05d}.md").write_text(
            f"---\n{front}---\n# Task {t}\n\nSummarise item {t}.\n" if front
            else f"# Task {t}\n\nSummarise item {t}.\n"
        )
    for m in range(mails):
        to = names[m % agents]
        box = hive.mailbox_dir(to)
        for sub in ("tmp", "new", "cur"):
            (box / sub).mkdir(parents=True, exist_ok=True)
        mid = f"human-mail-{m:04d}"
        (box / "new" / f"{mid}.md").write_text(
            f"---\nid: {mid}\nfrom: {HUMAN}\nto: {to}\nsubject: Question {m}\n---\n"
            f"Are you there ({m})?\n"
        )
    return hive


# -- the daemon as a subprocess -------------------------------------------------


def _env(mode: str, base_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["TIKTOKEN_CACHE_DIR"] = ""
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if mode == "anthropic":
        assert base_url is not None
        env["ANTHROPIC_API_KEY"] = KEY
        env["ANTHROPIC_BASE_URL"] = base_url
    return env


def start_daemon(hive: Hive, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "hivemind", "run", str(hive.root), "--until-idle", "--quiet",
             *([] if "ANTHROPIC_API_KEY" in env else ["--offline"])],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=hive.root,
        )
    finally:
        out.close()


def wait_ready(hive: Hive, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> bool:
    """Wait until status.json names this process (lock held, agents started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            status = json.loads(hive.status_file.read_text())
            if status.get("pid") == proc.pid and status.get("running"):
                return True
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    return False


def done_count(hive: Hive) -> int:
    try:
        return sum(1 for name in os.listdir(hive.done_dir) if name.endswith(".md"))
    except FileNotFoundError:
        return 0


def wait_progress(hive: Hive, proc: subprocess.Popen[bytes], target: int,
                  timeout: float = 60.0) -> None:
    """Wait until `target` tasks are done (or the daemon exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and done_count(hive) < target:
        time.sleep(0.005)


# -- reading the outcome --------------------------------------------------------


def audit_records(hive: Hive) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    if not hive.audit_dir.is_dir():
        return out
    for path in sorted(hive.audit_dir.glob("*.jsonl")):
        records = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                records.append(rec)
        out[path.stem] = records
    return out


WORKERS_EXIT = 30.0  # seconds a killed lead's workers may take to end their cycles


def children(pid: int) -> list[int]:
    """The pids of `pid`'s child processes (its workers), from /proc (Linux)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def wait_gone(pids: list[int], timeout: float) -> bool:
    """True once none of `pids` runs any more (False after `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{pid}").exists() for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def open_cycles(hive: Hive) -> dict[str, set[int]]:
    """Per agent: cycles started and neither ended nor marked interrupted."""
    out: dict[str, set[int]] = {}
    for agent, records in audit_records(hive).items():
        opened: set[int] = set()
        for rec in records:
            n = rec.get("cycle")
            if not isinstance(n, int):
                continue
            if rec.get("event") == "cycle_start":
                opened.add(n)
            elif rec.get("event") in ("cycle", "interrupted"):
                opened.discard(n)
        if opened:
            out[agent] = opened
    return out


def task_files(hive: Hive) -> Iterator[tuple[str, Path]]:
    """(place, path) of every non-temp file on the board."""
    places = [("pending", hive.tasks_dir), ("done", hive.done_dir), ("failed", hive.failed_dir),
              ("rejected", hive.rejected_dir)]
    if hive.active_dir.is_dir():
        places += [(f"active/{d.name}", d) for d in sorted(hive.active_dir.iterdir()) if d.is_dir()]
    for place, folder in places:
        if not folder.is_dir():
            continue
        for p in sorted(folder.iterdir()):
            if p.is_file() and not is_temp_name(p.name):
                yield place, p


def mail_files(hive: Hive) -> Iterator[tuple[str, str, Path]]:
    """(owner, new|cur, path) of every message file."""
    if not hive.mailboxes_dir.is_dir():
        return
    for box in sorted(hive.mailboxes_dir.iterdir()):
        for sub in ("new", "cur"):
            folder = box / sub
            if folder.is_dir():
                for p in sorted(folder.iterdir()):
                    if not is_temp_name(p.name):
                        yield box.name, sub, p


def temp_leftovers(hive: Hive) -> int:
    n = 0
    for dirpath, dirnames, filenames in os.walk(hive.root):
        dirnames[:] = [d for d in dirnames if d != ".hivemind"]
        n += sum(1 for f in filenames if f.endswith(".tmp") and f.startswith("."))
        n += len(filenames) if Path(dirpath).name == "tmp" and Path(dirpath).parent.parent == (
            hive.mailboxes_dir) else 0
    return n


def check(hive: Hive, result: CrashResult, mails: int, interrupted_at_kills: dict[str, set[int]],
          mode: str) -> None:
    """The final check: fills result.counts and result.problems."""
    problems = result.problems
    expected = {f"task{t:05d}" for t in range(result.tasks)}

    # -- tasks: each in done/ exactly once with one result -----------------------
    where: dict[str, list[str]] = {}
    notices_expected: dict[str, int] = {}
    results_ok = 0
    for place, path in task_files(hive):
        if place == "rejected":
            if not path.name.endswith(".reason"):
                problems.append(f"rejected: {path.name}")
            continue
        try:
            task = read_task(path)
        except FileFormatError as exc:
            problems.append(f"unreadable task file {place}/{path.name}: {exc.reason}")
            continue
        where.setdefault(task.id, []).append(place)
        if place == "done":
            # A notice goes to the requester, if any, unless it did the task itself.
            requester = task.reply_to or task.created_by
            notices_expected[task.id] = 1 if requester and requester != task.agent else 0
            n = task.body.count(RESULT)
            if n == 1:
                results_ok += 1
            else:
                problems.append(f"{task.id}: {n} '## Result' sections")
    lost = sorted(expected - set(where))
    dup = sorted(t for t, places in where.items() if len(places) > 1)
    not_done = sorted(t for t, places in where.items() if places != ["done"] and t in expected)
    extra = sorted(set(where) - expected)
    for label, ids in (("lost", lost), ("in two places", dup), ("not done", not_done),
                       ("unexpected task", extra)):
        if ids:
            problems.append(f"{len(ids)} task(s) {label}: {', '.join(ids[:5])}")

    # -- mail: whole, parsable, each id once across new/ and cur/ -----------------
    seen: dict[tuple[str, str], list[str]] = {}
    by_owner: dict[str, list[tuple[str, Any]]] = {}
    unparsable = 0
    for owner, sub, path in mail_files(hive):
        try:
            msg = read_message(path)
        except FileFormatError as exc:
            unparsable += 1
            problems.append(f"unparsable message {owner}/{sub}/{path.name}: {exc.reason}")
            continue
        seen.setdefault((owner, msg.id), []).append(sub)
        by_owner.setdefault(owner, []).append((sub, msg))
    twice = [k for k, subs in seen.items() if len(subs) > 1]
    if twice:
        problems.append(f"{len(twice)} message id(s) delivered twice: {twice[:3]}")

    # Interrupted cycles per task / per mail id: the bound for repeated sends.
    interrupted_tasks: Counter[str] = Counter()
    carried_mail: Counter[str] = Counter()  # cycles (ended or cut short) that saw a message
    for records in audit_records(hive).values():
        for rec in records:
            if rec.get("event") == "interrupted":
                interrupted_tasks.update(rec.get("tasks") or [])
            if rec.get("event") in ("interrupted", "cycle"):
                carried_mail.update(rec.get("mail") or [])

    human = by_owner.get(HUMAN, [])
    agent_mail = [m for owner, items in by_owner.items() if owner != HUMAN for _, m in items]
    notices: Counter[str] = Counter()
    acks: Counter[str] = Counter()
    for _, msg in human + [("", m) for m in agent_mail]:
        if msg.subject.startswith("[done]") and msg.task:
            notices[msg.task] += 1
        elif "Ack:" in msg.subject and msg.task:
            acks[msg.task] += 1
    bad_notices = sorted(t for t in expected if notices[t] != notices_expected.get(t, 1))
    if bad_notices:
        problems.append(f"{len(bad_notices)} task(s) without exactly the one [done] notice due: "
                        + ", ".join(f"{t}={notices[t]}" for t in bad_notices[:5]))
    resent_acks = sum(max(0, acks[t] - 1) for t in expected)
    if mode == "offline":
        missing = [t for t in expected if acks[t] == 0]
        over = [t for t in expected if acks[t] > 1 + interrupted_tasks[t]]
        if missing:
            problems.append(f"{len(missing)} task(s) never acknowledged: {missing[:5]}")
        if over:
            problems.append(f"{len(over)} task(s) acknowledged more often than interrupted: "
                            f"{over[:5]}")

    # -- human's mail to agents: read once, answered -------------------------------
    replies: Counter[str] = Counter(
        m.in_reply_to for _, m in human if m.in_reply_to and m.in_reply_to.startswith("human-mail")
    )
    unread_left = 0
    for m in range(mails):
        mid = f"human-mail-{m:04d}"
        owner = f"agent{m % result.agents}"
        subs = seen.get((owner, mid), [])
        if subs != ["cur"]:
            unread_left += 1
            problems.append(f"{mid}: in {subs or 'no folder'} of {owner}, expected cur/ once")
        # A kill after a cycle's record but before its mail moves to cur/ shows the
        # message again (DESIGN: seen again, never missed): one reply per cycle that saw it.
        if mode == "offline" and not 1 <= replies[mid] <= carried_mail[mid]:
            problems.append(f"{mid}: {replies[mid]} replies "
                            f"({carried_mail[mid]} cycles carried it)")

    # -- audit: every cycle a kill left open is marked interrupted exactly once -----
    records = audit_records(hive)
    marked: dict[str, Counter[int]] = {
        a: Counter(r["cycle"] for r in recs if r.get("event") == "interrupted") for a, recs in
        records.items()
    }
    interrupted_total = sum(sum(c.values()) for c in marked.values())
    for agent, cycles in interrupted_at_kills.items():
        for n in cycles:
            if marked.get(agent, Counter())[n] != 1:
                problems.append(f"{agent} cycle {n}: open at a kill, marked interrupted "
                                f"{marked.get(agent, Counter())[n]} times")
    for agent, counts in marked.items():
        unexplained = [n for n in counts if n not in interrupted_at_kills.get(agent, set())]
        if unexplained:
            problems.append(f"{agent}: interrupted records for cycles no kill left open: "
                            f"{unexplained[:5]}")
    still_open = open_cycles(hive)
    if still_open:
        problems.append(f"cycles never closed: {still_open}")
    for agent, recs in records.items():
        starts = Counter(r["cycle"] for r in recs if r.get("event") == "cycle_start")
        reused = [n for n, k in starts.items() if k > 1]
        if reused:
            problems.append(f"{agent}: cycle numbers started twice: {reused[:5]}")

    # -- long-term store --------------------------------------------------------
    db_state = "absent"
    if hive.memory_db.exists():
        conn = sqlite3.connect(hive.memory_db)
        try:
            verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            conn.close()
        db_state = verdict
        if verdict != "ok":
            problems.append(f"memory.db integrity_check: {verdict}")

    # -- the API key never on disk ------------------------------------------------
    if mode == "anthropic":
        for path in [hive.status_file, *hive.audit_dir.glob("*.jsonl"),
                     *hive.state_dir.glob("run-*.log")]:
            if path.exists() and KEY in path.read_text(errors="replace"):
                problems.append(f"API key found in {hive.relative(path)}")

    result.interrupted_records = interrupted_total
    result.counts = {
        "tasks_done_once": sum(1 for t in expected if where.get(t) == ["done"]),
        "results_ok": results_ok,
        "lost": len(lost),
        "duplicated": len(dup),
        "messages": sum(len(v) for v in seen.values()),
        "messages_duplicate_id": len(twice),
        "messages_unparsable": unparsable,
        "done_notices": sum(notices[t] for t in expected),
        "acks": sum(acks.values()),
        "acks_resent_after_kill": resent_acks,
        "human_mail_read_once": mails - unread_left,
        "replies": sum(replies.values()),
        "interrupted_records": interrupted_total,
        "temp_leftovers": temp_leftovers(hive),
        "memory_db": 1 if db_state == "ok" else 0,
    }


# -- the run --------------------------------------------------------------------


@contextmanager
def fake_api(mode: str, seed: int, max_delay: float) -> Iterator[str | None]:
    """The fake Messages API with a task-completing responder (anthropic mode)."""
    if mode != "anthropic":
        yield None
        return
    from tests.fake_anthropic import FakeAnthropic

    rng = random.Random(seed ^ 0x5EED)
    with FakeAnthropic() as api:
        # A killed daemon leaves half-sent requests and reset sockets: expected, not news.
        api._server.handle_error = lambda *args: None  # type: ignore[method-assign]

        def responder(body: Any) -> Any:
            if not isinstance(body, dict):  # the request was cut off by a kill
                return task_completer({"messages": [{"content": []}]})
            reply = task_completer(body)
            reply.delay = rng.uniform(0, max_delay)
            return reply

        api.responder = responder
        yield api.base_url


def task_completer(body: Any) -> Any:
    """A scripted model: complete every active task in the context, then end its turn."""
    from tests.fake_anthropic import Reply, message_body

    last = body["messages"][-1]["content"]
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
        return Reply(body=message_body([{"type": "text", "text": "all done"}]))
    first = body["messages"][0]["content"]
    entries = json.loads("".join(block["text"] for block in first) or "[]")
    calls = [
        {"type": "tool_use", "id": f"toolu_{i}", "name": "complete_task",
         "input": {"task_id": e["metadata"]["task_id"], "result": "done by the model"}}
        for i, e in enumerate(entries)
        if e["metadata"].get("type") == "task" and e["metadata"].get("status") == "active"
    ]
    if not calls:
        return Reply(body=message_body([{"type": "text", "text": "nothing to do"}]))
    return Reply(body=message_body(calls, stop_reason="tool_use"))


def run_crash(
    root: Path,
    *,
    tasks: int = 1000,
    agents: int = 4,
    kills: int = 100,
    seed: int = 0,
    mode: str = "offline",
    mails: int | None = None,
    jitter: float | None = None,
    reply_delay: float = 0.2,
    timeout: float = 1800.0,
    progress: bool = False,
) -> CrashResult:
    """Build a hive under `root`, run it to idle through `kills` SIGKILLs, check it."""
    mails = tasks // 10 if mails is None else mails
    jitter = jitter if jitter is not None else (0.5 if mode == "anthropic" else 0.3)
    hive = make_hive(root, tasks, agents, mails)
    result = CrashResult(mode=mode, tasks=tasks, agents=agents, seed=seed)
    rng = random.Random(seed)
    # Points of progress (tasks done) spread over the whole run: each kill waits for its own.
    targets = sorted(rng.randrange(tasks) for _ in range(kills))
    left_open: dict[str, set[int]] = {}
    log = hive.state_dir / "run-output.log"
    started = time.monotonic()
    with ExitStack() as stack:
        base_url = stack.enter_context(fake_api(mode, seed, reply_delay))
        env = _env(mode, base_url)
        while True:
            if time.monotonic() - started > timeout:
                result.problems.append(f"gave up after {timeout:.0f} s")
                break
            proc = start_daemon(hive, env, log)
            result.runs += 1
            if result.kills < kills:
                # One kill in ten lands during start-up (recovery); the others once the
                # work reaches the kill's point of progress, then a little later still.
                if rng.random() < 0.1:
                    time.sleep(rng.uniform(0.0, 1.5))
                else:
                    wait_ready(hive, proc)
                    wait_progress(hive, proc, targets[result.kills])
                    time.sleep(rng.uniform(0.0, jitter))
                if proc.poll() is None:
                    workers = children(proc.pid)
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    result.kills += 1
                    # Its worker processes finish the cycle in hand and exit on their own.
                    if not wait_gone(workers, WORKERS_EXIT):
                        result.problems.append(f"kill {result.kills}: a worker outlived "
                                               f"its lead by {WORKERS_EXIT:.0f} s")
                    opened = open_cycles(hive)
                    if opened:
                        result.kills_mid_cycle += 1
                    for agent, cycles in opened.items():
                        new = cycles - left_open.get(agent, set())
                        result.open_cycles_at_kills += len(new)
                        left_open.setdefault(agent, set()).update(cycles)
                    if progress:
                        done = done_count(hive)
                        print(f"  kill {result.kills:3d}: {done:5d} done, "
                              f"{sum(len(c) for c in opened.values())} cycle(s) open",
                              file=sys.stderr)
                    continue
            try:
                rc = proc.wait(timeout=max(1.0, timeout - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                result.problems.append("the last run did not reach idle in time")
                break
            if rc != 0:
                result.problems.append(f"run {result.runs} exited with {rc}")
            break
    # Cycles opened at one kill and closed by a later start count once.
    left_open = {a: {n for n in c} for a, c in left_open.items()}
    check(hive, result, mails, left_open, mode)
    output = log.read_text(errors="replace") if log.exists() else ""
    if "Traceback" in output:
        result.problems.append("a traceback in the daemon's output: "
                               + output[output.index("Traceback"):][:300])
    if mode == "anthropic" and KEY in output:
        result.problems.append("API key in the daemon's output")
    result.seconds = round(time.monotonic() - started, 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["offline", "anthropic"], default="offline")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the hive and print its path")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hivemind-crash-"))
    result = run_crash(tmp / "hive", tasks=args.tasks, agents=args.agents, kills=args.kills,
                       seed=args.seed, mode=args.mode, progress=True)
    print(json.dumps(result.as_dict(), indent=2))
    if args.keep or not result.ok:
        print(f"hive kept in {tmp / 'hive'}", file=sys.stderr)
    else:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if result.ok else 1



if __name__ == "__main__":
    raise SystemExit(main())
