"""`--workers N`: a hive's agents spread over several processes, on real hives and processes.

The lead keeps dispatch, wake-ups and status; worker processes (multiprocessing
"spawn") run the cycles of their share of the agents and report them back. A worker
that dies hands its agents back to the lead; a lead that dies makes its workers exit.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hivemind.agent.report import CycleReport
from hivemind.daemon import workers as workers_module
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.daemon.workers import AGENTS_PER_PROCESS, deal, process_count, share_of_calls
from hivemind.errors import ConfigError
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.hive.mailbox import Mailbox, PostOffice
from hivemind.llm.offline import OfflineProvider
from tests.helpers import fast_config, write_agent, write_task

ROOT = Path(__file__).resolve().parent.parent
WAIT = 30.0  # seconds any wait may take on a busy machine before the test gives up


# -- helpers --------------------------------------------------------------------


@dataclass
class Cycle:
    """One report the lead passed to `on_cycle`, and whether it came through a worker."""

    agent: str
    via_worker: bool
    tasks_done: int


@dataclass
class SpreadRun:
    hive: Hive
    daemon: Daemon
    reason: str
    tasks: list[str]
    cycles: list[Cycle] = field(default_factory=list)
    killed_at: int | None = None  # index into `cycles` when a worker was killed


def make_hive(root: Path, agents: list[str], tasks: dict[str, str]) -> Hive:
    """A hive with these agents and these tasks (stem -> front matter)."""
    hive = Hive(root).ensure()
    for name in agents:
        write_agent(hive, name)
    for stem, front in tasks.items():
        write_task(hive, stem, front=front)
    return hive


def start_spread(
    hive: Hive, workers: int, tasks: list[str], then: Callable[[SpreadRun], None] | None = None
) -> SpreadRun:
    """A daemon over `workers` processes whose on_cycle records every report (and then
    calls `then`)."""
    run = SpreadRun(hive=hive, daemon=None, reason="", tasks=tasks)  # type: ignore[arg-type]

    def on_cycle(report: CycleReport) -> None:
        runner = run.daemon.runners[report.agent]
        run.cycles.append(Cycle(report.agent, runner.worker is not None, report.tasks_done))
        if then is not None:
            then(run)

    run.daemon = Daemon(
        hive, fast_config(hive), OfflineProvider(),
        RunOptions(until_idle=True, idle_settle=0.2, workers=workers),
        on_cycle=on_cycle,
    )
    return run


def finish(run: SpreadRun) -> SpreadRun:
    async def main() -> None:
        run.reason = await asyncio.wait_for(run.daemon.run(), WAIT)

    asyncio.run(main())
    return run


def done_stems(hive: Hive) -> list[str]:
    return sorted(p.stem for p in hive.done_dir.glob("*.md"))


def result_headings(hive: Hive) -> dict[str, int]:
    return {p.stem: p.read_text().count("## Result") for p in hive.done_dir.glob("*.md")}


def left_over(hive: Hive) -> list[str]:
    """Task files still pending or active."""
    pending = [p.name for p in hive.tasks_dir.glob("*.md")]
    active = [str(p.relative_to(hive.tasks_dir)) for p in hive.active_dir.rglob("*.md")]
    return sorted(pending + active)


def env_without_key() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["TIKTOKEN_CACHE_DIR"] = ""
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cli(hive: Hive, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """`hivemind run <hive> ARGS` as a subprocess, its output going to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "hivemind", "run", str(hive.root), "--offline", *args],
            env=env_without_key(), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
        )


def proc_stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from the state on (field 3 onwards), or None if there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def children_of(parent: int, marker: bytes = b"multiprocessing") -> dict[int, str]:
    """Live children of `parent` whose command line contains `marker`: pid -> start time."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        stat = proc_stat(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if stat is not None and int(stat[1]) == parent and marker in cmdline:
            found[pid] = stat[19]  # starttime: tells the process from a later one with its pid
    return found


def still_running(processes: dict[int, str]) -> list[int]:
    """The pids of `processes` that still run (a zombie has ended; a reused pid is not it)."""
    out = []
    for pid, started in processes.items():
        stat = proc_stat(pid)
        if stat is not None and stat[0] != "Z" and stat[19] == started:
            out.append(pid)
    return out


def wait_until(
    condition: Callable[[], object], timeout: float = WAIT,
    proc: subprocess.Popen[bytes] | None = None,
) -> bool:
    """Poll `condition()` until it is true, `timeout` passes, or `proc` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if proc is not None and proc.poll() is not None:
            return bool(condition())
        time.sleep(0.02)
    return False


# -- pure functions -------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "processes", "shares"),
    [
        pytest.param(list("abcde"), 2, [["a", "c", "e"], ["b", "d"]], id="five-over-two"),
        pytest.param(["a", "b"], 3, [["a"], ["b"], []], id="more-processes-than-names"),
        pytest.param(list("abc"), 1, [["a", "b", "c"]], id="one-process"),
        pytest.param(list("abcdefg"), 3, [["a", "d", "g"], ["b", "e"], ["c", "f"]],
                     id="seven-over-three"),
    ],
)
def test_deal_hands_out_agents_round_robin_lead_first(
    names: list[str], processes: int, shares: list[list[str]]
) -> None:
    assert deal(names, processes) == shares


@pytest.mark.parametrize(
    ("total", "processes", "share"),
    [
        pytest.param(4, 2, 2, id="even"),
        pytest.param(5, 2, 2, id="rounds-down"),
        pytest.param(1, 3, 1, id="never-below-one"),
        pytest.param(8, 1, 8, id="one-process-keeps-all"),
    ],
)
def test_share_of_calls_splits_the_cap_over_the_processes(
    total: int, processes: int, share: int
) -> None:
    assert share_of_calls(total, processes) == share


@pytest.mark.parametrize(
    ("cores", "agents", "calls", "expected"),
    [
        pytest.param(2, 3, 4, 1, id="a-small-hive-stays-in-one-process"),
        pytest.param(2, AGENTS_PER_PROCESS, 4, 1, id="one-process-full-is-still-one"),
        pytest.param(2, AGENTS_PER_PROCESS + 1, 4, 2, id="one-agent-more-takes-a-second"),
        pytest.param(2, 50, 4, 2, id="never-more-than-the-cores"),
        pytest.param(8, 50, 4, 4, id="never-more-than-the-model-call-cap"),
        pytest.param(8, 50, 8, 4, id="one-per-16-agents-on-a-big-machine"),
        pytest.param(1, 50, 4, 1, id="one-core-one-process"),
    ],
)
def test_auto_workers_take_one_process_per_core_for_big_hives_only(
    monkeypatch: pytest.MonkeyPatch, cores: int, agents: int, calls: int, expected: int
) -> None:
    monkeypatch.setattr(workers_module, "usable_cores", lambda: cores)
    assert process_count("auto", agents, calls) == expected


def test_a_number_of_workers_is_kept_within_the_agents_and_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(workers_module, "usable_cores", lambda: 1)  # a number ignores cores
    assert process_count(3, 50, 4) == 3
    assert process_count(3, 2, 4) == 2
    assert process_count(3, 50, 2) == 2


def test_usable_cores_counts_at_least_one_core() -> None:
    assert workers_module.usable_cores() >= 1


# -- config ---------------------------------------------------------------------


def test_workers_default_to_auto_and_read_auto_or_a_number(hive: Hive) -> None:
    assert load_hive_config(hive).daemon.workers == "auto"
    hive.config_file.write_text('[daemon]\nworkers = "auto"\n')
    assert load_hive_config(hive).daemon.workers == "auto"
    hive.config_file.write_text("[daemon]\nworkers = 3\n")
    assert load_hive_config(hive).daemon.workers == 3


def test_a_word_other_than_auto_for_workers_is_refused_naming_the_key(hive: Hive) -> None:
    hive.config_file.write_text('[daemon]\nworkers = "many"\n')
    with pytest.raises(ConfigError) as caught:
        load_hive_config(hive)
    assert "hive.toml: line 2: daemon.workers" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_zero_workers_in_hive_toml_is_refused_in_one_line_naming_file_and_key(hive: Hive) -> None:
    hive.config_file.write_text("[daemon]\nworkers = 0\n")
    with pytest.raises(ConfigError) as caught:
        load_hive_config(hive)
    message = str(caught.value)
    assert "hive.toml: line 2: daemon.workers" in message
    assert "\n" not in message



def test_no_more_processes_than_the_model_call_cap(tmp_path: Path) -> None:
    # Each process needs a model-call slot: with a cap of 1, the daemon runs alone.
    hive = make_hive(tmp_path / "hive", ["ann", "bob"], {"t1": "assignee: bob\n"})
    run = start_spread(hive, 2, ["t1"])
    run.daemon.config.daemon.max_concurrent_calls = 1
    finish(run)
    assert run.reason == "idle"
    assert run.daemon.workers == []
    assert done_stems(hive) == ["t1"]

SCRIPT_WITHOUT_GUARD = """\
import asyncio, json, sys
from pathlib import Path
from hivemind.daemon.daemon import Daemon, RunOptions
from hivemind.hive.config import load_hive_config
from hivemind.hive.layout import Hive
from hivemind.llm.offline import OfflineProvider

hive = Hive(Path(sys.argv[1]))
config = load_hive_config(hive)
config.daemon.settle_time = 0.0
in_worker = []
def on_cycle(report):
    in_worker.append(daemon.runners[report.agent].worker is not None)
daemon = Daemon(hive, config, OfflineProvider(),
                RunOptions(until_idle=True, idle_settle=0.2, workers=2), on_cycle=on_cycle)
reason = asyncio.run(daemon.run())
print(json.dumps({"reason": reason, "cycles_in_worker": sum(in_worker)}))
"""


def test_a_script_without_a_main_guard_can_run_workers(tmp_path: Path) -> None:
    # spawn would run the script again in the worker, starting a second daemon there;
    # the worker is started without the parent's __main__ instead.
    hive = make_hive(tmp_path / "hive", ["ann", "bob"],
                     {f"t{i}": f"assignee: {'ann' if i % 2 else 'bob'}\n" for i in range(4)})
    script = tmp_path / "run_hive.py"
    script.write_text(SCRIPT_WITHOUT_GUARD)
    done = subprocess.run(
        [sys.executable, str(script), str(hive.root)],
        capture_output=True, text=True, env=env_without_key(), timeout=WAIT * 2, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["reason"] == "idle"
    assert outcome["cycles_in_worker"] >= 1
    assert done_stems(hive) == [f"t{i}" for i in range(4)]


# -- an in-process run over two processes ---------------------------------------

AGENTS = ["ann", "bob", "cid", "dot"]


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> SpreadRun:
    tasks = {f"t{i:02d}": "" for i in range(20)}
    hive = make_hive(tmp_path_factory.mktemp("spread") / "hive", AGENTS, tasks)
    return finish(start_spread(hive, 2, sorted(tasks)))


def test_a_run_over_two_processes_stops_idle(spread: SpreadRun) -> None:
    assert spread.reason == "idle"


def test_every_task_ends_in_done_exactly_once_with_one_result(spread: SpreadRun) -> None:
    assert done_stems(spread.hive) == spread.tasks
    assert set(result_headings(spread.hive).values()) == {1}


def test_no_task_is_left_pending_or_active(spread: SpreadRun) -> None:
    assert left_over(spread.hive) == []


def test_the_worker_shares_cycles_reach_on_cycle_through_the_worker(spread: SpreadRun) -> None:
    lead, worker = deal(AGENTS, 2)
    assert any(c.agent in lead and not c.via_worker for c in spread.cycles)
    assert any(c.agent in worker for c in spread.cycles)
    assert all(c.via_worker for c in spread.cycles if c.agent in worker)


def test_daemon_totals_count_the_cycles_and_tasks_of_both_processes(spread: SpreadRun) -> None:
    assert spread.daemon.totals.cycles == len(spread.cycles)
    assert spread.daemon.totals.tasks_done == len(spread.tasks)


def test_no_worker_process_is_alive_after_run_returns(spread: SpreadRun) -> None:
    assert len(spread.daemon.workers) == 1
    assert [link.process.is_alive() for link in spread.daemon.workers] == [False]


# -- mail between the processes -------------------------------------------------

# deal(["alpha", "bravo"], 2) == [["alpha"], ["bravo"]]: alpha runs in the lead, bravo
# in the worker.


@pytest.fixture(scope="module")
def mail_run(tmp_path_factory: pytest.TempPathFactory) -> SpreadRun:
    hive = make_hive(tmp_path_factory.mktemp("mail") / "hive", ["alpha", "bravo"],
                     {"t1": "assignee: alpha\nreply_to: bravo\n"})
    # alpha asks bravo something: bravo (worker) answers, alpha (lead) reads the answer.
    PostOffice(hive).send("alpha", "bravo", "Question", "Are you there?")
    return finish(start_spread(hive, 2, ["t1"]))


def subjects_read(hive: Hive, agent: str) -> list[tuple[str, str]]:
    return [(i.message.from_, i.message.subject) for i in Mailbox(hive, agent).read_items()]


def test_an_answer_from_the_worker_agent_is_read_by_the_lead_agent(mail_run: SpreadRun) -> None:
    assert deal(["alpha", "bravo"], 2) == [["alpha"], ["bravo"]]
    assert any(c.agent == "bravo" and c.via_worker for c in mail_run.cycles)
    assert ("bravo", "[offline] Re: Question") in subjects_read(mail_run.hive, "alpha")


def test_an_ack_from_the_lead_agent_is_read_by_the_worker_agent(mail_run: SpreadRun) -> None:
    acks = [s for f, s in subjects_read(mail_run.hive, "bravo")
            if f == "alpha" and s.startswith("[offline] Ack")]
    assert acks == ["[offline] Ack: t1"]


def test_mail_across_processes_leaves_no_unread_mail_and_stops_idle(mail_run: SpreadRun) -> None:
    assert mail_run.reason == "idle"
    assert Mailbox(mail_run.hive, "alpha").unread() == []
    assert Mailbox(mail_run.hive, "bravo").unread() == []


# -- a worker killed mid-run ----------------------------------------------------


def audit_events(hive: Hive, agent: str) -> list[tuple[str, int]]:
    """(event, cycle) of each whole record of `agent`'s audit log."""
    out = []
    path = hive.audit_path(agent)
    text = path.read_text(errors="replace") if path.exists() else ""
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line still being written
        if isinstance(record.get("cycle"), int):
            out.append((record["event"], record["cycle"]))
    return out


def open_cycle(hive: Hive, agents: tuple[str, ...]) -> bool:
    """Whether one of `agents` has started a cycle that has not ended yet."""
    return any(events and events[-1][0] == "cycle_start"
               for events in (audit_events(hive, a) for a in agents))


@pytest.fixture(scope="module")
def killed_worker(tmp_path_factory: pytest.TempPathFactory) -> SpreadRun:
    # Each agent has 15 tasks of its own (at most 4 active at a time, so 4 cycles): the
    # worker's agents still have work when the worker is killed.
    tasks = {f"{name}-{i:02d}": f"assignee: {name}\n" for name in AGENTS for i in range(15)}
    hive = make_hive(tmp_path_factory.mktemp("killed") / "hive", AGENTS, tasks)
    reported = threading.Event()

    def note_worker_reports(run: SpreadRun) -> None:
        if run.cycles[-1].via_worker:
            reported.set()

    run = start_spread(hive, 2, sorted(tasks), note_worker_reports)
    done = threading.Event()

    def killer() -> None:
        # Once a worker agent has reported, SIGKILL the worker in the middle of a cycle
        # (its agent's last audit record is a cycle_start).
        reported.wait(WAIT)
        link = run.daemon.workers[0]
        while not done.is_set():
            if link.process.is_alive() and open_cycle(hive, link.agents):
                os.kill(link.process.pid, signal.SIGKILL)  # type: ignore[arg-type]
                run.killed_at = len(run.cycles)
                return
            time.sleep(0.001)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        return finish(run)
    finally:
        done.set()
        thread.join()


def test_the_worker_was_killed_mid_run(killed_worker: SpreadRun) -> None:
    assert killed_worker.killed_at is not None
    assert killed_worker.daemon.workers[0].process.exitcode == -signal.SIGKILL


def test_a_run_whose_worker_is_killed_still_stops_idle(killed_worker: SpreadRun) -> None:
    assert killed_worker.reason == "idle"


def test_a_killed_worker_loses_and_repeats_no_task(killed_worker: SpreadRun) -> None:
    assert done_stems(killed_worker.hive) == killed_worker.tasks
    assert set(result_headings(killed_worker.hive).values()) == {1}
    assert left_over(killed_worker.hive) == []


def test_the_killed_workers_agents_keep_working_in_the_lead(killed_worker: SpreadRun) -> None:
    assert killed_worker.killed_at is not None
    after = killed_worker.cycles[killed_worker.killed_at:]
    for name in deal(AGENTS, 2)[1]:
        # A report the worker had sent before it was killed may still come in first.
        in_lead = [c for c in after if c.agent == name and not c.via_worker]
        assert sum(c.tasks_done for c in in_lead) > 0, f"{name} did no task after the kill"
        assert killed_worker.daemon.runners[name].worker is None


def test_a_worker_marks_its_agents_interrupted_cycles_when_it_starts(tmp_path: Path) -> None:
    hive = make_hive(tmp_path / "hive", ["alpha", "bravo"], {"t1": "assignee: bravo\n"})
    hive.audit_dir.mkdir(parents=True, exist_ok=True)
    hive.audit_path("bravo").write_text(  # as a killed run left it: cycle 7 never ended
        json.dumps({"event": "cycle_start", "at": "2026-01-01T00:00:00+00:00", "cycle": 7,
                    "tasks": ["t0"], "mail": []}) + "\n"
    )

    run = finish(start_spread(hive, 2, ["t1"]))

    assert any(c.agent == "bravo" and c.via_worker for c in run.cycles)
    events = audit_events(hive, "bravo")
    assert [n for e, n in events if e == "interrupted"] == [7]
    assert ("cycle", 8) in events


def test_the_killed_workers_agents_close_every_cycle_and_reuse_no_number(
    killed_worker: SpreadRun,
) -> None:
    # The cycle the kill interrupted is marked `interrupted` (by the lead, which takes the
    # agent back) and the lead's next cycle of that agent has the next number.
    for name in deal(AGENTS, 2)[1]:
        events = audit_events(killed_worker.hive, name)
        starts = [n for e, n in events if e == "cycle_start"]
        ends = [n for e, n in events if e in ("cycle", "interrupted")]
        assert starts == sorted(set(starts)), f"{name} reused a cycle number: {events}"
        assert sorted(ends) == starts, f"{name} left a cycle open: {events}"


# -- the CLI --------------------------------------------------------------------


@dataclass
class CliRun:
    hive: Hive
    returncode: int | None
    output: str
    tasks: list[str]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    tasks = {f"t{i}": "" for i in range(6)}
    hive = make_hive(tmp_path_factory.mktemp("cli") / "hive", ["ann", "bob"], tasks)
    log = hive.root.parent / "run.log"
    proc = cli(hive, log, "--until-idle", "--workers", "2")
    try:
        code: int | None = proc.wait(timeout=WAIT * 2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    return CliRun(hive, code, log.read_text(errors="replace"), sorted(tasks))


def test_cli_run_with_workers_exits_zero_and_prints_the_idle_summary(cli_run: CliRun) -> None:
    assert cli_run.returncode == 0, cli_run.output
    assert "stopped: idle" in cli_run.output
    assert "Traceback" not in cli_run.output


def test_cli_run_with_workers_does_every_task_once(cli_run: CliRun) -> None:
    assert done_stems(cli_run.hive) == cli_run.tasks
    assert set(result_headings(cli_run.hive).values()) == {1}


# -- signals to a lead run as a subprocess --------------------------------------


@dataclass
class SignalledRun:
    hive: Hive
    tasks: list[str]
    lead: int
    run_processes: dict[int, str]  # the lead's multiprocessing children (workers, tracker)
    workers: dict[int, str]  # of which the worker processes
    returncode: int | None
    output: str
    left_running: list[int] = field(default_factory=list)
    restart_code: int | None = None
    restart_output: str = ""


def pair_tasks(ann: int, bob: int) -> dict[str, str]:
    """Tasks for ann (the lead's agent) and bob (the worker's: deal([ann, bob], 2))."""
    tasks = {f"ann-{i:02d}": "assignee: ann\n" for i in range(ann)}
    tasks.update({f"bob-{i:02d}": "assignee: bob\n" for i in range(bob)})
    return tasks


def start_lead(root: Path, tasks: dict[str, str]) -> tuple[Hive, subprocess.Popen[bytes]]:
    """`hivemind run --workers 2` (no --until-idle) on ann and bob, once its worker runs."""
    hive = make_hive(root, ["ann", "bob"], tasks)
    proc = cli(hive, root.parent / "run.log", "--quiet", "--workers", "2")
    if not wait_until(lambda: children_of(proc.pid, b"spawn_main"), proc=proc):
        proc.kill()
        proc.wait()
        raise AssertionError("the lead started no worker process")
    return hive, proc


def wait_or_kill(proc: subprocess.Popen[bytes], condition: Callable[[], object]) -> None:
    """Wait for `condition` while the lead runs; kill it and fail if it does not come."""
    if not wait_until(condition, proc=proc) or proc.poll() is not None:
        proc.kill()
        proc.wait()
        raise AssertionError("the lead did not get there")


def bob_done(hive: Hive) -> int:
    return len(list(hive.done_dir.glob("bob-*.md")))


@pytest.fixture(scope="module")
def sigtermed(tmp_path_factory: pytest.TempPathFactory) -> SignalledRun:
    tasks = pair_tasks(6, 12)
    root = tmp_path_factory.mktemp("sigterm") / "hive"
    hive, proc = start_lead(root, tasks)
    wait_or_kill(proc, lambda: bob_done(hive) > 0)  # the worker is at work
    everything, workers = children_of(proc.pid), children_of(proc.pid, b"spawn_main")
    proc.send_signal(signal.SIGTERM)
    try:
        code: int | None = proc.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        code = None
    wait_until(lambda: not still_running(everything))
    run = SignalledRun(hive, sorted(tasks), proc.pid, everything, workers, code,
                       (root.parent / "run.log").read_text(errors="replace"),
                       left_running=still_running(everything))
    restart_log = root.parent / "restart.log"
    again = cli(hive, restart_log, "--quiet", "--until-idle", "--workers", "2")
    try:
        run.restart_code = again.wait(timeout=WAIT * 2)
    except subprocess.TimeoutExpired:
        again.kill()
        again.wait()
    run.restart_output = restart_log.read_text(errors="replace")
    return run


def test_sigterm_stops_a_lead_with_workers_with_exit_code_zero(sigtermed: SignalledRun) -> None:
    assert sigtermed.returncode == 0, sigtermed.output
    assert "stopped: signal" in sigtermed.output


def test_sigterm_to_the_lead_leaves_no_process_of_the_run_behind(
    sigtermed: SignalledRun,
) -> None:
    assert len(sigtermed.workers) == 1
    assert set(sigtermed.workers) <= set(sigtermed.run_processes)
    assert sigtermed.left_running == []


def test_a_restart_after_sigterm_finishes_every_task_exactly_once(
    sigtermed: SignalledRun,
) -> None:
    assert sigtermed.restart_code == 0, sigtermed.restart_output
    assert done_stems(sigtermed.hive) == sigtermed.tasks
    assert set(result_headings(sigtermed.hive).values()) == {1}
    assert left_over(sigtermed.hive) == []


def worker_idle_after_its_work(hive: Hive) -> bool:
    """bob's (the worker's) tasks are all done and his last cycle has ended."""
    events = audit_events(hive, "bob")
    return bob_done(hive) == 4 and bool(events) and events[-1][0] == "cycle"


@pytest.mark.parametrize(
    "moment",
    [
        pytest.param(lambda hive: True, id="while-the-worker-starts"),
        pytest.param(lambda hive: bob_done(hive) > 0, id="while-the-worker-works"),
        pytest.param(worker_idle_after_its_work, id="while-the-worker-waits"),
    ],
)
def test_workers_exit_on_their_own_when_the_lead_is_killed(
    tmp_path: Path, moment: Callable[[Hive], bool]
) -> None:
    hive, proc = start_lead(tmp_path / "hive", pair_tasks(2, 4))
    wait_or_kill(proc, lambda: moment(hive))
    workers = children_of(proc.pid, b"spawn_main")
    assert len(workers) == 1
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    wait_until(lambda: not still_running(workers), timeout=15.0)
    left = still_running(workers)
    for pid in left:  # do not leave it running for the tests that follow
        os.kill(pid, signal.SIGKILL)
    assert left == []
