"""DESIGN §3, measured: every guarantee of the file protocol tried many times.

    python bench/guarantees.py            # the full run (about 15 minutes)
    python bench/guarantees.py --quick    # a short one (about 3 minutes)

Scenarios:
  crash (offline / fake API)   SIGKILL at seeded random moments, restart, check
                               (bench/crash_harness.py); offline also with 40
                               agents, which run over worker processes
  bad input                    generated tasks, messages, ROMs, hive.toml; the
                               daemon and the CLI with all of it (bench/fuzz_harness.py)
  model faults, escapes and trust, concurrency
                               the pytest suites tests/test_guarantees_{faults,
                               escapes,concurrency}.py, run and counted

Prints a table (scenario, cases tried, failures) and the crash counts; exits 1
if anything failed.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")

from bench.crash_harness import CrashResult, run_crash
from bench.fuzz_harness import run_all as run_fuzz

ROOT = Path(__file__).resolve().parents[1]

PYTEST_SUITES = {
    "model faults (fake API)": "tests/test_guarantees_faults.py",
    "escapes and trust": "tests/test_guarantees_escapes.py",
    "concurrency": "tests/test_guarantees_concurrency.py",
}


@dataclass
class Row:
    scenario: str
    tried: int
    failures: int
    seconds: float
    notes: list[str] = field(default_factory=list)


def crash_row(label: str, result: CrashResult) -> Row:
    return Row(f"crash, {label}", result.kills, len(result.problems), result.seconds,
               result.problems[:10])


def pytest_row(label: str, path: str) -> Row:
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "-p", "no:cacheprovider",
             f"--junitxml={report}", path],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )
        if not report.exists():
            return Row(label, 0, 1, time.monotonic() - started, [proc.stdout[-500:]])
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        tried = int(suite.get("tests", 0)) - int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        notes = [
            case.get("name", "?") for case in suite.iter("testcase")
            if case.find("failure") is not None or case.find("error") is not None
        ]
    return Row(label, tried, failed, time.monotonic() - started, notes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short version")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=["crash", "input", "pytest"], default=None)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # each bad file logs a warning; thousands of them
    rows: list[Row] = []
    crashes: list[tuple[str, CrashResult]] = []
    started = time.monotonic()

    if args.only in (None, "crash"):
        # (mode, tasks, kills, agents): 40 agents take worker processes (workers "auto")
        # on a machine of two cores or more, whose cycles a killed lead leaves to end.
        plans = ([("offline", 100, 10, 4), ("offline", 400, 10, 40), ("anthropic", 50, 5, 4)]
                 if args.quick else
                 [("offline", 1000, 100, 4), ("offline", 2000, 40, 40),
                  ("anthropic", 1000, 100, 4)])
        for mode, tasks, kills, agents in plans:
            label = f"{mode}, {tasks} tasks" if mode == "offline" else f"fake API, {tasks} tasks"
            label += f", {agents} agents" if agents != 4 else ""
            print(f"running: crash, {label}, {kills} kills ...", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix="hivemind-crash-") as tmp:
                result = run_crash(Path(tmp) / "hive", tasks=tasks, kills=kills, seed=args.seed,
                                   mode=mode, agents=agents)
            crashes.append((label, result))
            rows.append(crash_row(label, result))

    if args.only in (None, "input"):
        print("running: bad input ...", file=sys.stderr, flush=True)
        outcomes = run_fuzz(quick=args.quick, seed=args.seed)
        rows += [Row(f"bad input: {o.scenario}", o.tried, o.failures, o.seconds, o.detail)
                 for o in outcomes]

    if args.only in (None, "pytest"):
        for label, path in PYTEST_SUITES.items():
            print(f"running: {label} ...", file=sys.stderr, flush=True)
            rows.append(pytest_row(label, path))

    width = max(len(r.scenario) for r in rows)
    print(f"\n{'scenario':<{width}}  {'cases':>7}  {'failures':>8}  {'seconds':>7}")
    print("-" * (width + 30))
    for r in rows:
        print(f"{r.scenario:<{width}}  {r.tried:>7}  {r.failures:>8}  {r.seconds:>7.0f}")
        for note in r.notes:
            print(f"{'':<{width}}    ! {note}")
    print("-" * (width + 30))
    print(f"{'total':<{width}}  {sum(r.tried for r in rows):>7}  "
          f"{sum(r.failures for r in rows):>8}  {time.monotonic() - started:>7.0f}")

    for label, result in crashes:
        print(f"\ncrash, {label}: {result.kills} kills ({result.kills_mid_cycle} mid-cycle), "
              f"{result.runs} runs, {result.open_cycles_at_kills} cycles cut short, "
              f"{result.interrupted_records} marked interrupted")
        print("  " + ", ".join(f"{k}={v}" for k, v in result.counts.items()))
    return 1 if any(r.failures for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
