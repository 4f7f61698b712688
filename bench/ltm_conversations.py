"""Seeded generator of multi-session user/assistant chats with known evidence turns.

Each user (one `project`) has ~30 sessions spread evenly over a year. Facts are
stated in sessions drawn uniformly at random (so evidence is spread evenly in
time), some are later superseded by an update (the update is the evidence, the
old statement a stale distractor), and every slot brings hard distractors about
other people plus on-topic chatter. Questions are asked after the last session.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bench.ltm_slots import ASSISTANT, ECHO, SLOTS, SMALL_TALK, Slot

START = datetime(2023, 1, 1, tzinfo=UTC)
SPAN = timedelta(days=365)


@dataclass
class Turn:
    id: str
    content: str
    timestamp: datetime
    project: str
    role: str


@dataclass
class Question:
    id: str
    query: str
    project: str
    at: datetime
    evidence: set[str]
    kind: str  # "single" or "update"


@dataclass
class Dataset:
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def generate(users: int, seed: int = 7, sessions: int = 30, facts: int = 12) -> Dataset:
    """`users` independent chat histories (one project each) with `facts` questions each."""
    rng = random.Random(seed)
    data = Dataset()
    for u in range(users):
        _user(rng, f"user{u:03d}", sessions, facts, data)
    return data


def _user(rng: random.Random, project: str, n_sessions: int, n_facts: int, data: Dataset) -> None:
    # Session s happens at an even step through the year (plus some hours of jitter).
    times = [START + SPAN * (s + 0.5) / n_sessions for s in range(n_sessions)]
    plan: list[list[tuple[str, str, str | None]]] = [[] for _ in range(n_sessions)]
    asked: list[tuple[str, Slot, str]] = []  # (question key, slot, kind)
    for slot in rng.sample(SLOTS, min(n_facts, len(SLOTS))):
        value, other, newer = rng.sample(slot.values, 3)
        key = f"{project}-{slot.name}"
        first = rng.randrange(n_sessions)
        if slot.update and rng.random() < 0.5 and first < n_sessions - 1:
            later = rng.randrange(first + 1, n_sessions)
            plan[first].append(("stale", rng.choice(slot.state).format(v=value), None))
            plan[later].append(("fact", rng.choice(slot.update).format(v=newer), key))
            asked.append((key, slot, "update"))
        else:
            plan[first].append(("fact", rng.choice(slot.state).format(v=value), key))
            asked.append((key, slot, "single"))
        for template in slot.near:
            plan[rng.randrange(n_sessions)].append(("near", template.format(o=other), None))
        for chat in rng.sample(slot.chatter, min(2, len(slot.chatter))):
            plan[rng.randrange(n_sessions)].append(("chatter", chat, None))
    evidence: dict[str, str] = {}
    for s, items in enumerate(plan):
        turns_plan = items + [("small", t, None) for t in rng.sample(SMALL_TALK, rng.randint(3, 6))]
        rng.shuffle(turns_plan)
        clock = times[s] + timedelta(minutes=rng.randint(0, 600))
        for t, (kind, text, key) in enumerate(turns_plan):
            turn_id = f"{project}-s{s:02d}-t{2 * t:02d}"
            data.turns.append(Turn(turn_id, text, clock, project, "user"))
            if key is not None:
                evidence[key] = turn_id
            clock += timedelta(minutes=1)
            reply = _reply(rng, kind, text)
            data.turns.append(Turn(f"{project}-s{s:02d}-t{2 * t + 1:02d}", reply, clock,
                                   project, "assistant"))  # fmt: skip
            clock += timedelta(minutes=rng.randint(1, 5))
    asked_at = START + SPAN + timedelta(days=1)
    for key, slot, kind in asked:
        data.questions.append(
            Question(f"q-{key}", rng.choice(slot.ask), project, asked_at, {evidence[key]}, kind)
        )


def _reply(rng: random.Random, kind: str, text: str) -> str:
    if kind in ("fact", "stale", "near") and rng.random() < 0.6:
        words = [w.strip(".,!?:") for w in text.split() if len(w.strip(".,!?:")) > 3]
        topic = " ".join(rng.sample(words, min(3, len(words)))) or "that"
        return rng.choice(ECHO).format(topic=topic)
    return rng.choice(ASSISTANT)
