"""The committed conversation recall set is the one its generator makes, and the size asked."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from bench.recall_set import DATA, KINDS, generate


def _text(rows: list[dict]) -> str:  # type: ignore[type-arg]
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def test_committed_set_is_what_the_seeded_generator_makes() -> None:
    turns, questions = generate()
    for name, rows in (("turns.jsonl", turns), ("questions.jsonl", questions)):
        made = hashlib.sha256(_text(rows).encode()).hexdigest()
        committed = hashlib.sha256((DATA / name).read_bytes()).hexdigest()
        assert made == committed, f"{name} differs: run python -m bench.recall_set --write"


def test_set_has_the_conversations_sessions_and_questions_asked_for() -> None:
    turns, questions = generate()
    per_conv = Counter(t["project"] for t in turns)
    sessions = {p: {t["session"] for t in turns if t["project"] == p} for p in per_conv}
    assert len(per_conv) >= 20
    assert min(per_conv.values()) >= 300
    assert min(len(s) for s in sessions.values()) >= 10
    kinds = Counter(q["kind"] for q in questions)
    assert all(kinds[k] >= 100 for k in KINDS)
    ids = {t["id"] for t in turns}
    assert all(set(q["evidence"]) <= ids for q in questions)
    assert all(len(q["evidence"]) == 2 for q in questions if q["kind"] == "pair")
