"""The recall set ranked through the library, one configuration at a time.

Used by bench/bench_recall.py --variants on the store the CLI made: the same
memories and questions, each score formula (and ablation) side by side.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from hivemind.ltm.retrieval import RetrievalTuning, Retriever
from hivemind.ltm.sqlite import SQLiteBackend
from hivemind.ltm.store import scope_filter
from hivemind.settings import RetrievalWeights

VARIANTS: dict[str, tuple[RetrievalWeights, RetrievalTuning]] = {
    "BM25 only": (RetrievalWeights(alpha=1.0, beta=0.0, gamma=0.0), RetrievalTuning()),
    "formula: α·rel + β·rec + γ·imp, all min-max (DESIGN §5)": (
        RetrievalWeights(),
        RetrievalTuning(gate=0.0, minmax_relevance=True),
    ),
    "formula: α·rel + rel²·(β·rec + γ·imp), rel share of best (default)": (
        RetrievalWeights(),
        RetrievalTuning(),
    ),
    "ablation: gate 1": (RetrievalWeights(), RetrievalTuning(gate=1.0)),
    "ablation: no gate, rel share of best": (RetrievalWeights(), RetrievalTuning(gate=0.0)),
    "ablation: half-life 30 days": (RetrievalWeights(), RetrievalTuning(half_life_hours=720)),
}


def rank(
    store: Path, questions: Sequence[dict[str, Any]], weights: RetrievalWeights,
    tuning: RetrievalTuning,
) -> dict[str, list[str]]:  # fmt: skip
    """Question id → the ids of its top 10, as `memory search` would rank them."""
    backend = SQLiteBackend(store, read_only=True)
    try:
        retriever = Retriever(backend, weights, tuning)
        out = {}
        for q in questions:
            found = retriever.retrieve(
                q["query"], scope_filter(q["project"], None), k=10,
                at=datetime.fromisoformat(q["at"]),
            )  # fmt: skip
            out[q["id"]] = [m.id for m in found]
        return out
    finally:
        backend.close()


def rank_variants(
    store: Path, questions: Sequence[dict[str, Any]]
) -> dict[str, dict[str, list[str]]]:
    return {name: rank(store, questions, w, t) for name, (w, t) in VARIANTS.items()}


if __name__ == "__main__":  # python -m bench.recall_variants STORE: misses of the defaults
    import json

    from bench.bench_recall import load

    _, qs = load(quick=False)
    got = rank(Path(sys.argv[1]), qs, RetrievalWeights(), RetrievalTuning())
    for q in qs:
        if not set(q["evidence"]) <= set(got[q["id"]]) and (
            len(sys.argv) < 3 or q["kind"] == sys.argv[2]
        ):
            print(
                json.dumps(
                    {
                        "q": q["query"],
                        "kind": q["kind"],
                        "ev": q["evidence"],
                        "top": got[q["id"]][:5],
                    }
                )
            )
