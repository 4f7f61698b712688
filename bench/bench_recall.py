"""Recall on multi-session conversations, per kind of question, through the CLI.

    python bench/bench_recall.py                # the committed set, default settings
    python bench/bench_recall.py --quick        # 8 of the 24 conversations
    python bench/bench_recall.py --embeddings   # also with the embeddings extra

The set (bench/data/recall, made by bench/recall_set.py) is imported with
`hivemind memory import` into a fresh hive and asked with `memory search --queries`,
as a public benchmark would be. Recall@k is the share of a question's evidence turns
in the top k (a `pair` question has two; `both@10` counts only when both are);
nDCG@10 has binary gains. `--variants` also ranks the same store through the
library with each score formula and ablation (bench/recall_variants.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.recall_set import DATA, KINDS
from hivemind.hive.layout import Hive

ROOT = Path(__file__).resolve().parents[1]
Question = dict[str, Any]


def load(quick: bool) -> tuple[list[str], list[Question]]:
    turns = (DATA / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines()]
    if quick:
        keep = {f"conv{c:02d}" for c in range(8)}
        turns = [t for t in turns if json.loads(t)["project"] in keep]
        questions = [q for q in questions if q["project"] in keep]
    return turns, questions


def scores(ranked: Sequence[str], evidence: Sequence[str]) -> dict[str, float]:
    """R@5, R@10 (share of the evidence found), both@10, nDCG@10 of one question."""
    want = set(evidence)
    out = {f"R@{k}": len(want & set(ranked[:k])) / len(want) for k in (5, 10)}
    out["both@10"] = float(want <= set(ranked[:10]))
    dcg = sum(1 / math.log2(i + 2) for i, mid in enumerate(ranked[:10]) if mid in want)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(want))))
    out["nDCG@10"] = dcg / ideal
    return out


def table(
    ranked: dict[str, list[str]], questions: Iterable[Question]
) -> dict[str, dict[str, float]]:
    """Mean figures per kind and over all questions."""
    rows: dict[str, list[dict[str, float]]] = {}
    for q in questions:
        s = scores(ranked.get(q["id"], []), q["evidence"])
        rows.setdefault(q["kind"], []).append(s)
        rows.setdefault("all", []).append(s)
    return {
        kind: {m: sum(r[m] for r in got) / len(got) for m in got[0]}
        for kind in (*KINDS, "all")
        if (got := rows.get(kind))
    }


def print_table(name: str, figures: dict[str, dict[str, float]]) -> None:
    print(f"\n{name}")
    print(f"  {'kind':<6} {'R@5':>6} {'R@10':>6} {'nDCG@10':>8} {'both@10':>8}")
    for kind, m in figures.items():
        both = f"{m['both@10']:8.3f}" if kind in ("pair", "all") else f"{'-':>8}"
        print(f"  {kind:<6} {m['R@5']:6.3f} {m['R@10']:6.3f} {m['nDCG@10']:8.3f} {both}")


def cli(args: Sequence[str], hive: Path) -> str:
    # This checkout first; a PYTHONPATH given stays after it (an extra's packages kept apart).
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, "-m", "hivemind", "memory", *args, "--hive", str(hive)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[2:])} failed:\n{done.stderr}")
    return done.stdout


def run_cli(
    workdir: Path, turns: list[str], questions: list[Question], embeddings: bool
) -> tuple[dict[str, list[str]], Path, dict[str, float]]:
    """Import and ask through the CLI; (ranked ids per question, the store, seconds)."""
    hive = workdir / ("hive-emb" if embeddings else "hive")
    Hive(hive).ensure()
    turns_file, queries_file = workdir / "turns.jsonl", workdir / "queries.jsonl"
    turns_file.write_text("\n".join(turns) + "\n", encoding="utf-8")
    queries_file.write_text(
        "".join(
            json.dumps({k: q[k] for k in ("id", "query", "project", "at")}) + "\n"
            for q in questions
        ),
        encoding="utf-8",
    )
    extra = ["--embeddings"] if embeddings else []
    started = time.perf_counter()
    cli(["import", str(turns_file), *extra], hive)
    imported = time.perf_counter() - started
    started = time.perf_counter()
    out = cli(["search", "--queries", str(queries_file), "--k", "10", *extra], hive)
    searched = time.perf_counter() - started
    ranked = {}
    for line in out.splitlines():
        answer = json.loads(line)
        ranked[answer["id"]] = [r["id"] for r in answer["results"]]
    return ranked, Hive(hive).memory_db, {"import_s": imported, "search_s": searched}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 of the 24 conversations")
    parser.add_argument("--embeddings", action="store_true", help="also run with embeddings")
    parser.add_argument("--variants", action="store_true", help="also each score formula")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    turns, questions = load(args.quick)
    convs = len({q["project"] for q in questions})
    print(f"recall set: {convs} conversations, {len(turns)} turns, {len(questions)} questions")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="recall-bench-") as tmp:
        ranked, store, took = run_cli(Path(tmp), turns, questions, embeddings=False)
        figures["defaults"] = table(ranked, questions)
        print_table(
            f"defaults, no embeddings (import {took['import_s']:.1f} s, "
            f"{len(questions)} searches {took['search_s']:.1f} s)",
            figures["defaults"],
        )
        if args.variants:
            from bench.recall_variants import rank_variants

            for name, got in rank_variants(store, questions).items():
                figures[name] = table(got, questions)
                print_table(name, figures[name])
        if args.embeddings:
            from hivemind.ltm.embeddings import embeddings_installed

            if not embeddings_installed():
                print("\nembeddings: not installed here (see README, Embeddings)")
            else:
                ranked, _, took = run_cli(Path(tmp), turns, questions, embeddings=True)
                figures["embeddings"] = table(ranked, questions)
                print_table("defaults + embeddings", figures["embeddings"])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
