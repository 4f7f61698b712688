"""Worker processes as they start, fail and end: a lead killed with -9 takes its workers
with it and a restart waits for any it left; a stop reaches the workers with the lead's
grace period and hurry; a bug or a death in a worker is told once and costs no more
than its own cycle.

Real hives, real worker processes ("spawn"), real signals; slow model calls come from
the fake Messages API on 127.0.0.1, bugs from a `sitecustomize` the workers load.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import pytest

from hivemind.agent.cycle import Agent
from hivemind.agent.report import CycleReport
from hivemind.agent.services import HiveServices
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.lock import hold_as_worker, workers_lock_path
from hivemind.daemon.worker_process import WorkerSpec
from hivemind.daemon.workers import STOP_MARGIN, Outcome, WorkerLink, deal
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.llm.offline import OfflineProvider
from hivemind.llm.select import make_provider
from tests.fake_anthropic import FakeAnthropic, Reply, message_body
from tests.helpers import fast_config, until, write_agent
from tests.scripted_model import active_tasks, is_first_round, task_completer, tool_use
from tests.test_daemon_workers import (
    AGENTS,
    ROOT,
    WAIT,
    SpreadRun,
    audit_events,
    children_of,
    cli,
    done_stems,
    env_without_key,
    finish,
    left_over,
    make_hive,
    result_headings,
    start_spread,
    still_running,
    wait_or_kill,
    wait_until,
)

KEY = "sk-ant-test-key-of-the-worker-lifecycle-tests"
SLOW = 60.0  # s a slow model call takes: no test waits for one to end
# deal(["ann", "bob"], 2): ann runs in the lead, bob in the worker.
PAIR = {"ann-1": "assignee: ann\n", "bob-1": "assignee: bob\n"}


# -- helpers --------------------------------------------------------------------


def reporting_completer(body: Any) -> Reply:
    """A model that tells human of each active task it is shown, then completes it."""
    tasks = active_tasks(body)
    if not is_first_round(body) or not tasks:
        return task_completer(body)
    calls = [tool_use(2 * i, "send_message", to="human", subject=f"report {tid}",
                      body=f"{tid} is done") for i, tid in enumerate(tasks)]
    calls += [tool_use(2 * i + 1, "complete_task", task_id=tid, result="reported")
              for i, tid in enumerate(tasks)]
    return Reply(body=message_body(calls, stop_reason="tool_use"))


def slow_model(api: FakeAnthropic, slow_calls: int, delay: float) -> None:
    """The first `slow_calls` cycles' model calls take `delay` s; every call completes the
    tasks it is shown."""
    count = itertools.count()
    lock = threading.Lock()

    def respond(body: Any) -> Reply:
        reply = task_completer(body)
        if is_first_round(body):
            with lock:
                if next(count) < slow_calls:
                    reply.delay = delay
        return reply

    api.responder = respond


def held_model(api: FakeAnthropic, held: int, model: Callable[[Any], Reply]) -> None:
    """The first `held` cycles' model calls are answered only once a later cycle's call
    about one of the same tasks has come (or WAIT s on); `model` answers each."""
    lock = threading.Lock()
    holding: list[tuple[set[str], threading.Event]] = []

    def respond(body: Any) -> Reply:
        if is_first_round(body):
            tasks = set(active_tasks(body))
            with lock:
                for seen, answer in holding:
                    if seen & tasks:
                        answer.set()
                hold = threading.Event() if len(holding) < held else None
                if hold is not None:
                    holding.append((tasks, hold))
            if hold is not None:
                hold.wait(WAIT)
        return model(body)

    api.responder = respond


def first_calls(api: FakeAnthropic) -> int:
    """The cycles' first model calls the fake has received."""
    return sum(1 for r in api.message_requests if is_first_round(r.body))


def run_with_api(
    hive: Hive, api: FakeAnthropic, out: Path, *args: str, err: Path | None = None
) -> subprocess.Popen[bytes]:
    """`hivemind run <hive> ARGS` against the fake API; stdout to `out` (stderr too, or
    to `err`)."""
    env = env_without_key()
    env.update(ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=api.base_url)
    with out.open("ab") as stdout, (err or out).open("ab") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "hivemind", "run", str(hive.root), *args],
            env=env, stdout=stdout, stderr=stderr, cwd=ROOT,
        )


def exit_code(proc: subprocess.Popen[bytes], timeout: float = WAIT) -> int | None:
    """The process's exit code once it ends (None if it had to be killed)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def records(hive: Hive, agent: str) -> list[dict[str, Any]]:
    path = hive.audit_path(agent)
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def status_json(hive: Hive) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(hive.status_file.read_text())
    return data


class Warnings(logging.Handler):
    """Collects the messages hivemind logs at WARNING and above."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self, containing: str) -> list[str]:
        return [m for r in self.records if containing in (m := r.getMessage())]


@pytest.fixture(scope="module")
def warnings_of() -> Iterator[Callable[[], Warnings]]:
    """Start collecting hivemind's warnings (for a module-scoped run)."""
    logger = logging.getLogger("hivemind")
    handlers: list[Warnings] = []

    def start() -> Warnings:
        handlers.append(Warnings())
        logger.addHandler(handlers[-1])
        return handlers[-1]

    yield start
    for handler in handlers:
        logger.removeHandler(handler)


# -- a lead killed with -9 ----------------------------------------------------------


@dataclass
class KilledLead:
    hive: Hive
    workers: dict[int, str]
    gone_after: float | None  # s from the kill until the worker had ended
    restart_code: int | None
    restart_output: str


@pytest.fixture(scope="module")
def killed_lead(tmp_path_factory: pytest.TempPathFactory) -> KilledLead:
    root = tmp_path_factory.mktemp("killed-lead") / "hive"
    hive = make_hive(root, ["ann", "bob"], PAIR)
    with FakeAnthropic() as api:
        # The calls in flight at the kill are answered once the restart calls: a worker
        # left running would go on with its cycle beside the restart's.
        held_model(api, 2, reporting_completer)
        lead = run_with_api(hive, api, root.parent / "lead.log", "--quiet", "--workers", "2")
        wait_or_kill(lead, lambda: first_calls(api) == 2)  # both agents' calls in flight
        workers = children_of(lead.pid, b"spawn_main")
        killed_at = time.monotonic()
        lead.kill()
        lead.wait()
        wait_until(lambda: not still_running(workers), timeout=3.0)
        gone_after = None if still_running(workers) else time.monotonic() - killed_at
        restart_log = root.parent / "restart.log"
        restart = run_with_api(hive, api, restart_log, "--quiet", "--until-idle", "--workers", "2")
        code = exit_code(restart)
        wait_until(lambda: not still_running(workers), timeout=5.0)  # such a worker's end
    for pid in still_running(workers):
        os.kill(pid, signal.SIGKILL)
    return KilledLead(hive, workers, gone_after, code, restart_log.read_text(errors="replace"))


def test_a_lead_killed_mid_cycle_takes_its_worker_with_it_at_once(killed_lead: KilledLead) -> None:
    assert len(killed_lead.workers) == 1
    assert killed_lead.gone_after is not None, "the worker outlived its call"
    assert killed_lead.gone_after < 1.5, f"the worker lived {killed_lead.gone_after:.1f} s on"


def test_a_restart_right_after_the_kill_runs_no_cycle_beside_the_dead_ones(
    killed_lead: KilledLead,
) -> None:
    # bob's cycle was in flight in the worker: the restart marks it interrupted, and a
    # worker left running ended it all the same, beside the restart's own.
    events = audit_events(killed_lead.hive, "bob")
    cut = {n for e, n in events if e == "interrupted"}
    assert cut == {1}, events
    assert ("cycle", 1) not in events, "a cycle marked interrupted ended after all"


def test_a_restart_right_after_the_kill_does_each_task_once(killed_lead: KilledLead) -> None:
    assert killed_lead.restart_code == 0, killed_lead.restart_output
    assert done_stems(killed_lead.hive) == sorted(PAIR)
    assert set(result_headings(killed_lead.hive).values()) == {1}
    completed = [t for name in ("ann", "bob") for r in records(killed_lead.hive, name)
                 if r["event"] == "cycle" for t in r["effects"]["tasks_completed"]]
    assert sorted(completed) == sorted(PAIR)
    # A worker left running finished its call too: human had each report twice.
    reports = sorted(i.message.subject for i in Mailbox(killed_lead.hive, "human").unread())
    assert reports == [f"report {t}" for t in sorted(PAIR)]


HOLDER = """\
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_SH)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_daemon_runs_no_agent_while_a_worker_of_an_earlier_one_still_lives(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The holder stands for a worker a killed lead left (stuck in the kernel, say): it
    # holds the workers lock shared until it ends.
    hive = make_hive(tmp_path / "hive", ["ann"], {"t1": ""})
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(workers_lock_path(hive))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == b"held\n"
    released: list[float] = []

    def release() -> None:
        released.append(time.time())
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()

    daemon = Daemon(hive, fast_config(hive), OfflineProvider(),
                    RunOptions(until_idle=True, idle_settle=0.2, workers=1))

    async def main() -> str:
        asyncio.get_running_loop().call_later(0.5, release)
        return await asyncio.wait_for(daemon.run(), WAIT)

    with caplog.at_level(logging.WARNING):
        reason = asyncio.run(main())

    assert reason == "idle"
    starts = [datetime.fromisoformat(r["at"]).timestamp()
              for r in records(hive, "ann") if r["event"] == "cycle_start"]
    assert starts, "ann never ran"
    assert min(starts) >= released[0]
    assert f"waiting for the worker processes of an earlier daemon to exit (pid {holder.pid})" \
        in caplog.text


def test_a_worker_stays_out_of_a_hive_a_newer_daemon_has_taken(hive: Hive) -> None:
    path = workers_lock_path(hive)
    path.parent.mkdir(parents=True, exist_ok=True)
    newer = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(newer, fcntl.LOCK_EX)
    try:
        assert hold_as_worker(hive) is None
    finally:
        os.close(newer)
    held = hold_as_worker(hive)
    assert held is not None
    os.close(held)


def held_by_a_worker(path: Path) -> bool:
    """Whether some process holds a lock on `path` (an exclusive one cannot be had)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_worker_holds_the_workers_lock_again_once_its_file_was_removed(
    tmp_path: Path,
) -> None:
    # `rm -rf .hivemind` took the file the workers held: a daemon started after their
    # lead died (where they outlive it) made a new one, found it free, and ran the same
    # agents beside them. bob runs in the worker.
    hive = make_hive(tmp_path / "hive", ["ann", "bob"], {"bob-1": "assignee: bob\n"})
    daemon = Daemon(hive, fast_config(hive), OfflineProvider(), RunOptions(workers=2))
    path = workers_lock_path(hive)

    async def main() -> bool:
        run = asyncio.ensure_future(daemon.run())
        try:
            await until((hive.done_dir / "bob-1.md").exists, "bob's first task is done")
            assert held_by_a_worker(path)
            shutil.rmtree(hive.state_dir)
            (hive.tasks_dir / "bob-2.md").write_text("---\nassignee: bob\n---\n# bob-2\n")
            await until((hive.done_dir / "bob-2.md").exists, "bob's next cycle has run")
            return held_by_a_worker(path)
        finally:
            daemon.stop("test")
            await asyncio.wait_for(run, WAIT)

    assert asyncio.run(main()), f"nobody holds {path} after the removal"
    assert daemon.runners["bob"].worker is daemon.workers[0]  # it ran there all along


# -- Ctrl-C with cycles in flight in a worker ------------------------------------


@dataclass
class Stopped:
    hive: Hive
    returncode: int | None
    seconds: float  # from the last signal to the exit
    stdout: str
    output: str


def stop_with_signals(
    root: Path, toml: str, signals: int, *args: str, delay: float = SLOW,
    stuck_worker: bool = False,
) -> Stopped:
    """ann (the lead's) and bob (the worker's) each have a call in flight when `signals`
    SIGINTs, 0.3 s apart, reach the lead (`stuck_worker`: its worker SIGSTOPped first)."""
    hive = make_hive(root, ["ann", "bob"], PAIR)
    hive.config_file.write_text(toml)
    out, err = root.parent / "out.log", root.parent / "err.log"
    with FakeAnthropic() as api:
        slow_model(api, 2, delay)
        lead = run_with_api(hive, api, out, "--workers", "2", *args, err=err)
        wait_or_kill(lead, lambda: first_calls(api) == 2)
        workers = children_of(lead.pid, b"spawn_main")
        if stuck_worker:
            for pid in workers:
                os.kill(pid, signal.SIGSTOP)
        for k in range(signals):
            if k:
                time.sleep(0.3)
            lead.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        code = exit_code(lead)
        seconds = time.monotonic() - signalled
    for pid in still_running(workers):
        os.kill(pid, signal.SIGKILL)
    return Stopped(hive, code, seconds, out.read_text(errors="replace"),
                   err.read_text(errors="replace"))


GRACE = 1.0


@pytest.fixture(scope="module")
def one_ctrl_c(tmp_path_factory: pytest.TempPathFactory) -> Stopped:
    # The calls take 3 s: past the grace period, but they would end before the lead did.
    root = tmp_path_factory.mktemp("one-ctrl-c") / "hive"
    return stop_with_signals(root, f"[daemon]\ngrace_period = {GRACE}\nsettle_time = 0.0\n",
                             1, "--json", delay=3.0)


def test_one_ctrl_c_stops_a_lead_with_workers_within_the_grace_period(one_ctrl_c: Stopped) -> None:
    assert one_ctrl_c.returncode == 0, one_ctrl_c.output
    assert one_ctrl_c.seconds < GRACE + STOP_MARGIN + 1.0, one_ctrl_c.output


def test_a_workers_cycle_past_the_grace_period_is_cut_as_the_leads_is(one_ctrl_c: Stopped) -> None:
    # (ann's call, in the lead, began while the worker was still starting: it may end in
    # time.) bob's began at most a moment before the stop and is cut: no record, and the
    # task stays claimed for the next start.
    assert [r["event"] for r in records(one_ctrl_c.hive, "bob")] == ["cycle_start"]
    assert (one_ctrl_c.hive.active_dir_for("bob") / "bob-1.md").is_file()


def test_the_json_summary_counts_every_cycle_the_audit_records(one_ctrl_c: Stopped) -> None:
    summary = json.loads(one_ctrl_c.stdout)
    recorded = [r for name in ("ann", "bob") for r in records(one_ctrl_c.hive, name)
                if r["event"] == "cycle"]
    assert summary["stopped_because"] == "signal"
    assert summary["cycles"] == len(recorded)
    assert summary["tasks_done"] == len(done_stems(one_ctrl_c.hive))


def test_status_json_is_final_and_names_the_worker_after_a_stop(one_ctrl_c: Stopped) -> None:
    status = status_json(one_ctrl_c.hive)
    assert status["running"] is False
    assert [(w["agents"], w["running"], w["ended"]) for w in status["workers"]] == [
        (["bob"], False, None)
    ]


@pytest.fixture(scope="module")
def two_ctrl_c(tmp_path_factory: pytest.TempPathFactory) -> Stopped:
    root = tmp_path_factory.mktemp("two-ctrl-c") / "hive"
    return stop_with_signals(root, "[daemon]\ngrace_period = 30\nsettle_time = 0.0\n", 2)


def test_ctrl_c_again_stops_a_lead_with_workers_at_once(two_ctrl_c: Stopped) -> None:
    # The grace period is 30 s (a lead whose workers were not hurried took 10 s more).
    assert two_ctrl_c.returncode == 0, two_ctrl_c.output
    assert two_ctrl_c.seconds < STOP_MARGIN + 1.0, two_ctrl_c.output
    assert "stopped: signal" in two_ctrl_c.stdout
    assert status_json(two_ctrl_c.hive)["running"] is False


@pytest.fixture(scope="module")
def stuck_worker(tmp_path_factory: pytest.TempPathFactory) -> Stopped:
    # A worker that cannot stop (SIGSTOPped): the lead kills it STOP_MARGIN s after the
    # second Ctrl-C; the third comes while it waits for that.
    root = tmp_path_factory.mktemp("stuck-worker") / "hive"
    return stop_with_signals(root, "[daemon]\ngrace_period = 30\nsettle_time = 0.0\n", 3,
                             stuck_worker=True)


def test_a_worker_that_does_not_stop_is_killed_a_moment_past_the_hurry(
    stuck_worker: Stopped,
) -> None:
    # The second Ctrl-C came 0.3 s before the third; the grace period is 30 s.
    assert stuck_worker.seconds < STOP_MARGIN + 3.0, stuck_worker.output
    # a notice of the daemon: a timed line among `run`'s event lines
    assert "did not stop in time: killed" in stuck_worker.stdout + stuck_worker.output


def test_a_third_ctrl_c_still_leaves_the_summary_and_a_final_status(stuck_worker: Stopped) -> None:
    assert stuck_worker.returncode == 0, stuck_worker.output
    assert "stopped: signal" in stuck_worker.stdout
    assert "Traceback" not in stuck_worker.output
    assert status_json(stuck_worker.hive)["running"] is False


def test_a_cycle_the_lead_stopped_waiting_for_still_reaches_it(hive: Hive) -> None:
    # The lead gave up on the cycle (its grace period ran out first): the worker's report
    # of it, coming later, is handed over all the same, to be counted.
    for name in ("ann", "bob"):
        write_agent(hive, name)
    PostOffice(hive).send("ann", "bob", "Question", "Are you there?")
    config = fast_config(hive)
    late: list[tuple[str, Outcome]] = []

    async def main() -> Agent:
        services = HiveServices.open(hive, OfflineProvider(), config)
        mirror = Agent("bob", services)
        spec = WorkerSpec(root=str(hive.root), lead=os.getpid(), config=config, offline=True,
                          secrets=(), agents=("bob",), model_calls=1)
        link = WorkerLink(spec, on_dispatch=lambda: None, on_mail=lambda names: None,
                          on_load=lambda agent, delta: None,
                          on_late=lambda agent, outcome: late.append((agent.name, outcome)),
                          on_lost=lambda link: None)
        link.start()
        try:
            await asyncio.wait_for(link.ready(), WAIT)
            waiting = asyncio.ensure_future(link.cycle(mirror))
            await asyncio.sleep(0)  # the cycle is asked for: the task waits for its report
            waiting.cancel()
            deadline = time.monotonic() + WAIT
            while not late and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        finally:
            link.stop(WAIT)
            await asyncio.wait_for(link.exited(), WAIT)
            link.close()
        return mirror

    mirror = asyncio.run(main())

    assert [(name, type(outcome)) for name, outcome in late] == [("bob", CycleReport)]
    report = late[0][1]
    assert isinstance(report, CycleReport) and report.ran and report.cycle == 1
    assert mirror.cycle_no == 1  # the worker's state of the agent came with it


def bobs_link(hive: Hive, secrets: tuple[Any, ...] = (), **callbacks: Any) -> WorkerLink:
    """A link to a worker process running bob (not started); `callbacks` replace the
    ones that do nothing."""
    spec = WorkerSpec(root=str(hive.root), lead=os.getpid(), config=fast_config(hive),
                      offline=True, secrets=secrets, agents=("bob",), model_calls=1)
    nothing: dict[str, Any] = {
        "on_dispatch": lambda: None, "on_mail": lambda names: None,
        "on_load": lambda agent, delta: None, "on_late": lambda agent, outcome: None,
        "on_lost": lambda link: None,
    }
    return WorkerLink(spec, **{**nothing, **callbacks})


def test_a_worker_dead_in_the_stop_before_its_end_was_read_is_told_at_the_close(
    hive: Hive,
) -> None:
    # The stop's close took what was left in the pipe, EOF included, and told nobody:
    # no line in the log, and its temp files stayed until the next start.
    write_agent(hive, "bob")
    lost: list[WorkerLink] = []

    async def main() -> WorkerLink:
        link = bobs_link(hive, on_lost=lost.append)
        link.start()
        await asyncio.wait_for(link.ready(), WAIT)
        assert link.pid is not None
        os.kill(link.pid, signal.SIGSTOP)  # it cannot act on the stop below
        link.stop(WAIT)
        os.kill(link.pid, signal.SIGKILL)
        link.process.join(WAIT)  # the loop waits too: its reader never sees the EOF
        link.close()
        return link

    link = asyncio.run(main())
    assert lost == [link]
    assert link.failure() == "killed by SIGKILL"


def test_a_worker_that_cannot_start_leaves_no_pipe_open(hive: Hive) -> None:
    write_agent(hive, "bob")
    resource_tracker.ensure_running()  # (the first start opens its pipe, for good)

    def open_fds() -> set[str]:
        return set(os.listdir("/proc/self/fd"))

    async def main() -> set[str]:
        before = open_fds()
        link = bobs_link(hive, secrets=(threading.Lock(),))  # spawn cannot send it
        with pytest.raises(TypeError, match="pickle"):
            link.start()
        # What the start opened and left open stays open; a descriptor a thread of an
        # earlier test opens and closes meanwhile does not (in the full suite: +2 once).
        for _ in range(100):
            left = open_fds() - before
            if not left:
                break
            await asyncio.sleep(0.02)
        return left

    assert asyncio.run(main()) == set()


# -- a bug in a worker's cycle -----------------------------------------------------

BUG = """\
import os
if os.environ.get("HIVEMIND_TEST_BUGGY_AGENT"):
    from hivemind.agent import cycle

    think = cycle.Agent._think

    async def _think(self, cfg, p, report):
        if self.name == os.environ["HIVEMIND_TEST_BUGGY_AGENT"]:
            raise RuntimeError(f"a bug in {self.name}'s cycle")
        return await think(self, cfg, p, report)

    cycle.Agent._think = _think
"""


def inject(mp: pytest.MonkeyPatch, tmp: Path, code: str, **env: str) -> None:
    """Worker processes started from now on load `code` (their sitecustomize; this
    process does not), with `env` set."""
    (tmp / "inject").mkdir()
    (tmp / "inject" / "sitecustomize.py").write_text(code)
    for name, value in env.items():
        mp.setenv(name, value)
    mp.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(tmp / "inject"), str(ROOT), os.environ.get("PYTHONPATH")])))


@dataclass
class BuggyRun:
    run: SpreadRun
    warnings: Warnings
    link: WorkerLink = field(init=False)


@pytest.fixture(scope="module")
def buggy_worker(
    tmp_path_factory: pytest.TempPathFactory, warnings_of: Callable[[], Warnings]
) -> BuggyRun:
    # deal(AGENTS, 2): bob and dot run in the worker; bob's cycle hits a bug there (the
    # workers load the sitecustomize below; this process does not).
    tmp = tmp_path_factory.mktemp("buggy")
    tasks = {"bob-1": "assignee: bob\n"}
    tasks.update({f"dot-{i}": "assignee: dot\n" for i in range(6)})
    hive = make_hive(tmp / "hive", AGENTS, tasks)
    with pytest.MonkeyPatch.context() as mp:
        inject(mp, tmp, BUG, HIVEMIND_TEST_BUGGY_AGENT="bob")
        run = start_spread(hive, 2, sorted(tasks))
        run.daemon.options.backoff = 0.05
        buggy = BuggyRun(run, warnings_of())
        finish(run)
    buggy.link = run.daemon.workers[0]
    return buggy


def test_a_bug_in_one_agents_cycle_leaves_its_worker_running(buggy_worker: BuggyRun) -> None:
    assert deal(AGENTS, 2)[1] == ["bob", "dot"]
    assert buggy_worker.run.daemon.runners["dot"].worker is buggy_worker.link
    assert buggy_worker.link.process.exitcode == 0  # it ran until the daemon stopped it
    assert buggy_worker.link.failure() is None


def test_the_other_agents_of_that_worker_do_their_tasks_there(buggy_worker: BuggyRun) -> None:
    dot = [c for c in buggy_worker.run.cycles if c.agent == "dot"]
    assert dot and all(c.via_worker for c in dot)
    assert [s for s in done_stems(buggy_worker.run.hive) if s.startswith("dot")] == [
        f"dot-{i}" for i in range(6)
    ]


def test_the_buggy_cycle_is_retried_after_its_back_off(buggy_worker: BuggyRun) -> None:
    errors = [r["error"] for r in records(buggy_worker.run.hive, "bob") if r["event"] == "error"]
    assert len(errors) >= 2
    assert set(errors) == {"RuntimeError: a bug in bob's cycle"}
    assert buggy_worker.run.reason == "stalled"  # bob-1 is left, for a fixed hivemind


def test_the_bug_shows_as_it_would_in_the_lead(buggy_worker: BuggyRun) -> None:
    bob = buggy_worker.run.daemon.runners["bob"].agent
    assert bob.last_error == "RuntimeError: a bug in bob's cycle"


def test_each_failed_cycle_is_logged_once_with_the_workers_traceback(
    buggy_worker: BuggyRun,
) -> None:
    logged = [r for r in buggy_worker.warnings.records
              if r.getMessage().startswith("bob: a cycle failed on a bug in hivemind")]
    errors = [r for r in records(buggy_worker.run.hive, "bob") if r["event"] == "error"]
    assert len(logged) == len(errors)
    for record in logged:
        message = record.getMessage()
        assert f"(in worker process {buggy_worker.link.pid})" in message
        assert message.count("Traceback (most recent call last)") == 1
        assert record.exc_info is None  # no second traceback, of the lead's own frames
        assert message.rstrip().endswith("RuntimeError: a bug in bob's cycle")


# -- a worker killed mid-run -----------------------------------------------------


@dataclass
class LostWorker:
    run: SpreadRun
    warnings: Warnings
    pid: int = 0
    planted: list[Path] = field(default_factory=list)


@pytest.fixture(scope="module")
def lost_worker(
    tmp_path_factory: pytest.TempPathFactory, warnings_of: Callable[[], Warnings]
) -> LostWorker:
    tasks = {f"{name}-{i:02d}": f"assignee: {name}\n" for name in AGENTS for i in range(8)}
    hive = make_hive(tmp_path_factory.mktemp("lost") / "hive", AGENTS, tasks)

    def kill_at_first_worker_report(run: SpreadRun) -> None:
        if lost.pid or not run.cycles[-1].via_worker:
            return
        pid = run.daemon.workers[0].process.pid
        assert pid is not None
        lost.pid = pid
        # As a worker killed between writing a file and renaming it leaves it.
        temp = hive.workspace_dir / f".draft.md.{pid}-abcdef-1.tmp"
        temp.write_text("half a draft")
        lost.planted.append(temp)
        os.kill(pid, signal.SIGKILL)

    run = start_spread(hive, 2, sorted(tasks), kill_at_first_worker_report)
    lost = LostWorker(run, warnings_of())
    finish(run)
    return lost


def test_a_dead_worker_is_told_once_with_its_pid_and_agents(lost_worker: LostWorker) -> None:
    told = lost_worker.warnings.lines(f"worker process {lost_worker.pid}")
    assert told == [
        f"worker process {lost_worker.pid} ended (killed by SIGKILL): its agents bob, dot run "
        f"in this process (pid {os.getpid()}) from now on"
    ]


def test_status_json_says_which_worker_died_and_how(lost_worker: LostWorker) -> None:
    assert status_json(lost_worker.run.hive)["workers"] == [
        {"pid": lost_worker.pid, "agents": ["bob", "dot"], "running": False,
         "ended": "killed by SIGKILL"}
    ]


def test_a_dead_workers_temp_files_are_removed_without_a_restart(lost_worker: LostWorker) -> None:
    assert lost_worker.planted
    assert not lost_worker.planted[0].exists()


# -- a worker whose pipe closes but which does not exit ----------------------------

STUCK = """\
import os
if os.environ.get("HIVEMIND_TEST_STUCK_WORKER"):
    import time
    from hivemind.daemon import worker_process

    cycle = worker_process._WorkerHost._cycle

    async def _cycle(self, name, seq):
        await cycle(self, name, seq)
        self.conn.close()  # its pipe closes, unasked; the process stays, stuck
        time.sleep(60)

    worker_process._WorkerHost._cycle = _cycle
"""
STUCK_FOR = "it closed its pipe but was still there 2 s on: killed"


@pytest.fixture(scope="module")
def lingering_worker(
    tmp_path_factory: pytest.TempPathFactory, warnings_of: Callable[[], Warnings]
) -> LostWorker:
    # The worker (bob and dot) closes its pipe after its first cycle and stays: the lead
    # kills it LINGER s on, and its agents come home.
    tmp = tmp_path_factory.mktemp("lingering")
    tasks = {f"{name}-{i:02d}": f"assignee: {name}\n" for name in AGENTS for i in range(3)}
    hive = make_hive(tmp / "hive", AGENTS, tasks)

    def plant_at_first_worker_report(run: SpreadRun) -> None:
        if stuck.pid or not run.cycles[-1].via_worker:
            return
        stuck.pid = run.daemon.workers[0].pid or 0
        temp = hive.workspace_dir / f".draft.md.{stuck.pid}-abcdef-1.tmp"
        temp.write_text("half a draft")
        stuck.planted.append(temp)

    with pytest.MonkeyPatch.context() as mp:
        inject(mp, tmp, STUCK, HIVEMIND_TEST_STUCK_WORKER="1")
        run = start_spread(hive, 2, sorted(tasks), plant_at_first_worker_report)
        stuck = LostWorker(run, warnings_of())
        finish(run)
    return stuck


def test_a_worker_killed_for_lingering_is_told_once(lingering_worker: LostWorker) -> None:
    assert lingering_worker.pid
    assert lingering_worker.warnings.lines(f"worker process {lingering_worker.pid}") == [
        f"worker process {lingering_worker.pid} ended ({STUCK_FOR}): its agents bob, dot "
        f"run in this process (pid {os.getpid()}) from now on"
    ]
    assert lingering_worker.run.reason == "idle"
    assert not left_over(lingering_worker.run.hive)  # its agents did the rest here


def test_status_json_says_the_worker_was_killed_for_lingering(
    lingering_worker: LostWorker,
) -> None:
    assert status_json(lingering_worker.run.hive)["workers"] == [
        {"pid": lingering_worker.pid, "agents": ["bob", "dot"], "running": False,
         "ended": STUCK_FOR}
    ]


def test_a_worker_killed_for_lingering_leaves_no_temp_file(lingering_worker: LostWorker) -> None:
    assert lingering_worker.planted
    assert not lingering_worker.planted[0].exists()


# -- a worker that dies while the daemon stops --------------------------------------


def test_a_worker_dying_during_the_stop_gets_no_cycle_started_in_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    hive = make_hive(tmp_path / "hive", ["ann", "bob"], PAIR)
    config = fast_config(hive)
    config.daemon.grace_period = 1.5
    with FakeAnthropic() as api:
        slow_model(api, 2, SLOW)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # the worker's provider too
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        daemon = Daemon(hive, config, make_provider(config.provider), RunOptions(workers=2))

        async def main() -> str:
            run = asyncio.ensure_future(daemon.run())
            deadline = time.monotonic() + WAIT
            while first_calls(api) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            daemon.stop("signal")
            await asyncio.sleep(0.3)
            pid = daemon.workers[0].pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            return await asyncio.wait_for(run, WAIT)

        with caplog.at_level(logging.WARNING):
            reason = asyncio.run(main())
        calls = len(api.message_requests)

    assert reason == "signal"
    assert calls == 2  # no new model call on the way out
    assert [n for e, n in audit_events(hive, "bob") if e == "cycle_start"] == [1]
    assert (f"worker process {daemon.workers[0].pid} ended while the daemon stopped "
            "(killed by SIGKILL)") in caplog.text


# -- an invalid ROM ---------------------------------------------------------------


def test_an_invalid_rom_is_told_once_however_many_processes_read_it(tmp_path: Path) -> None:
    hive = make_hive(tmp_path / "hive", ["ann", "bob", "cid"], {"t1": "assignee: ann\n"})
    hive.rom_path("bob").write_text("---\nrole: [unclosed\n---\nYou are bob.\n")
    log = tmp_path / "run.log"
    proc = cli(hive, log, "--until-idle", "--quiet", "--workers", "3")
    code = exit_code(proc, WAIT * 2)
    output = log.read_text(errors="replace")
    assert code == 4, output  # the run met an invalid ROM: the summary names it
    told = [x for x in output.splitlines() if "agents/bob/ROM.md" in x]
    assert len(told) == 2 and told[1].startswith("invalid ROM: bob: "), output
