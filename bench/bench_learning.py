"""Task-outcome benchmark: does the value learned per goal (TD(λ), the δ weight) make
an agent recall the lesson that works?

    python bench/bench_learning.py            # 5 seeds, 8 rounds of 24 kinds of task
    python bench/bench_learning.py --quick    # 3 seeds, 4 rounds

Tasks come from four domains (billing, deploy, support, data), three problems each,
asked as a fix or as a review: 24 kinds of task. For each kind, five lessons are in
memory ("Lesson on a duplicate invoice: ..."), worded alike, so the query matches
them about equally; one is right for that kind, and the right lesson for a fix is
not the one for a review of the same problem. Their importance and age are random,
and 120 notes that share words with the tasks sit beside them.

Each task goes through the real path: its goal is inferred from its text and the
agent's skills (`ltm.goals`), the agent recalls the `k` best memories for the task
text with that goal (`LongTermMemory.recall`, which records the TD traces) and
follows the first lesson among them; the task succeeds if that lesson is the right
one, and `end_task` learns from the outcome. Success is counted over every task,
and over the second half (once there was something to learn from).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hivemind.hive.models import Task
from hivemind.ltm.goals import task_goal
from hivemind.ltm.store import LongTermMemory
from hivemind.settings import MemorySettings, RetrievalWeights

DOMAINS: dict[str, list[str]] = {
    "billing": ["a duplicate invoice", "a refund to a closed card", "a VAT mismatch"],
    "deploy": ["a failed database migration", "a stuck canary release",
               "an expired TLS certificate"],
    "support": ["an angry enterprise customer", "a password reset loop",
                "a missing data export"],
    "data": ["a broken nightly ETL job", "a skewed dashboard metric",
             "a slow warehouse query"],
}
KINDS = {"fix": "Fix", "review": "Review"}
ACTIONS = [
    "roll back the last change before anything else", "escalate to the on-call lead",
    "open a ticket with the vendor", "retry once with the force flag",
    "ask the customer for a screenshot", "restore from the last snapshot",
    "page the finance team", "wait an hour and try again", "compare against the staging copy",
    "rotate the credentials", "rerun it with verbose logging", "split the work in two",
    "check the audit trail first", "freeze the account until it is clear",
    "write to the customer before touching it",
]
NOTES = [
    "The {d} team meets on Mondays.", "{p} came up in the weekly review.",
    "Someone asked about {p} in the {d} channel.", "The {d} runbook moved to the wiki.",
    "A new hire is reading about {p}.", "The {d} dashboard got a new colour scheme.",
]
LESSONS_PER_KIND = 5
SKILLS = list(DOMAINS)


@dataclass(frozen=True)
class Kind:
    domain: str
    problem: str
    verb: str

    def text(self, rng: random.Random) -> str:
        tail = rng.choice(["", " again", " for ACME", " before Friday", " today"])
        return f"{KINDS[self.verb]} {self.problem} in {self.domain}{tail}."


def kinds() -> list[Kind]:
    return [Kind(d, p, v) for d, problems in DOMAINS.items() for p in problems for v in KINDS]


def run(seed: int, weights: RetrievalWeights, k: int, rounds: int) -> tuple[float, float]:
    """(success over every task, success over the second half) for one seed."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory() as folder, LongTermMemory(
        Path(folder) / "memory.db", MemorySettings(max_items=100_000), weights
    ) as ltm:
        right: dict[str, str] = {}  # lesson id -> the kind it is right for
        for kind in kinds():
            actions = rng.sample(ACTIONS, LESSONS_PER_KIND)
            for n, action in enumerate(actions):
                record = ltm.remember(
                    f"Lesson on {kind.problem} ({KINDS[kind.verb].lower()}): {action}.",
                    agent="ann", scope="project", project="ops",
                    importance=round(rng.uniform(0.2, 0.9), 2),
                    at=start - timedelta(days=rng.uniform(1, 90)),
                )  # fmt: skip
                if n == 0:
                    right[record.id] = f"{kind}"
        for n in range(120):
            domain = rng.choice(SKILLS)
            note = rng.choice(NOTES).format(d=domain, p=rng.choice(DOMAINS[domain]))
            ltm.remember(f"{note} (note {n})", agent="bob", scope="project", project="ops",
                         at=start - timedelta(days=rng.uniform(1, 90)))
        lessons = {r.id for r in ltm.backend.query({"agent": "ann"})}
        plan = [kind for _ in range(rounds) for kind in rng.sample(kinds(), len(kinds()))]
        outcomes: list[bool] = []
        for n, kind in enumerate(plan):
            now = start + timedelta(hours=n)
            task = Task(id=f"t{n}", title=kind.text(rng))
            goal = task_goal(task, SKILLS).key
            found = ltm.recall(task.title, agent="ann", project="ops", task_id=task.id, k=k,
                               at=now, goal=goal)
            followed = next((m.id for m in found if m.id in lessons), None)
            success = followed is not None and right.get(followed) == f"{kind}"
            ltm.end_task(task.id, success=success, goal=goal, project="ops", agent="ann",
                         at=now)
            outcomes.append(success)
    half = outcomes[len(outcomes) // 2:]
    return sum(outcomes) / len(outcomes), sum(half) / len(half)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, 4 rounds")
    parser.add_argument("--deltas", default="0,0.5,1.0,2.0",
                        help="values of the learned-value weight to compare")
    args = parser.parse_args(argv)
    seeds = range(3) if args.quick else range(5)
    rounds = 4 if args.quick else 8
    default = RetrievalWeights()
    deltas = sorted({float(d) for d in args.deltas.split(",")} | {default.delta, 0.0})
    print(f"{len(kinds())} kinds of task x {rounds} rounds; medians over {len(seeds)} seeds "
          f"of the share of tasks that followed the right lesson (one among "
          f"{LESSONS_PER_KIND * len(KINDS)} on its problem)")
    print(f"{'delta':>7} {'k':>3} {'success':>8} {'2nd half':>9}")
    for k in (3, 5):
        for delta in deltas:
            weights = default.model_copy(update={"delta": delta})
            results = [run(seed, weights, k, rounds) for seed in seeds]
            every = statistics.median(r[0] for r in results)
            late = statistics.median(r[1] for r in results)
            mark = "  (default)" if delta == default.delta else ""
            print(f"{delta:>7.2f} {k:>3} {every:>8.2f} {late:>9.2f}{mark}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
