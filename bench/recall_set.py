"""The multi-session conversation recall set: a seeded generator and its committed copy.

    python -m bench.recall_set --write   # regenerate bench/data/recall/*.jsonl

24 conversations (one `project` each) of 12–15 dated sessions and 300+ turns; four
kinds of question, 120 of each (see `bench/recall_facts.py`, `bench/recall_talk.py`):
`once` (a fact said once, in the first third), `pair` (two facts from two sessions),
`when` (a dated activity asked relative to another session's topic, or by its date),
`who` (a person named in the question, said as "my sister" or "she" in the evidence).
Every question is asked the day after its conversation's last session.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.recall_facts import ONCE, PAIR
from bench.recall_talk import (
    ACTIVITIES,
    ANCHORS,
    ASSISTANT,
    ECHO,
    FEMALE,
    INTRO,
    INTRO_TAIL,
    LEAD_IN,
    LEAD_REPLY,
    MALE,
    NEWS,
    RELATIVES,
    SMALL_TALK,
)  # fmt: skip

DATA = Path(__file__).resolve().parent / "data" / "recall"
SEED = 2026
CONVERSATIONS = 24
PER_KIND = 5  # questions of each kind per conversation
KINDS = ("once", "pair", "when", "who")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
NUMBERS = ("zero", "one", "two", "three", "four")


@dataclass
class Say:
    """One user turn to place in a session; `key` marks it as a question's evidence."""

    text: str
    key: str | None = None
    hide: str = ""  # words the assistant's echo must not repeat (the answer)
    reply: str | None = None  # a fixed assistant reply
    then: list[Say] = field(default_factory=list)  # turns that must follow at once


@dataclass
class Plan:
    conv: str
    dates: list[datetime]
    sessions: list[list[Say]]
    questions: list[dict[str, object]] = field(default_factory=list)

    def put(self, session: int, say: Say) -> None:
        self.sessions[session].append(say)


def generate(seed: int = SEED, conversations: int = CONVERSATIONS) -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    """(turn lines, question lines) of the whole set, as written to bench/data/recall."""
    rng = random.Random(seed)
    turns: list[dict] = []  # type: ignore[type-arg]
    questions: list[dict] = []  # type: ignore[type-arg]
    for c in range(conversations):
        plan = _plan(rng, f"conv{c:02d}")
        evidence = _render(rng, plan, turns)
        asked = plan.dates[-1].replace(hour=10, minute=0) + timedelta(days=1)
        for q in plan.questions:
            keys = q.pop("keys")
            assert isinstance(keys, list)
            q["evidence"] = [evidence[k] for k in keys]
            q["at"] = asked.isoformat()
            questions.append(q)
    return turns, questions


def _plan(rng: random.Random, conv: str) -> Plan:
    n = rng.randint(12, 15)
    day = datetime(2023, 1, 2, tzinfo=UTC) + timedelta(days=rng.randint(0, 300))
    dates = []
    for _ in range(n):
        dates.append(day.replace(hour=rng.randint(8, 20), minute=rng.randint(0, 59)))
        day += timedelta(days=rng.randint(1, 8))
    plan = Plan(conv, dates, [[] for _ in range(n)])
    _once(rng, plan)
    _pairs(rng, plan)
    _when(rng, plan)
    _who(rng, plan)
    return plan


def _ask(plan: Plan, kind: str, query: str, keys: list[str]) -> None:
    number = sum(q["kind"] == kind for q in plan.questions)
    plan.questions.append(
        {"id": f"{plan.conv}-{kind}{number}", "kind": kind, "project": plan.conv,
         "query": query, "keys": keys}
    )  # fmt: skip


def _once(rng: random.Random, plan: Plan) -> None:
    n = len(plan.sessions)
    for i, slot in enumerate(rng.sample(ONCE, PER_KIND)):
        value, other = rng.sample(slot.values, 2)
        key = f"once{i}"
        plan.put(
            rng.randrange(max(1, n // 3)), Say(rng.choice(slot.state).format(v=value), key, value)
        )
        for near in slot.near:
            plan.put(rng.randrange(n), Say(near.format(o=other)))
        _ask(plan, "once", rng.choice(slot.ask), [key])


def _pairs(rng: random.Random, plan: Plan) -> None:
    n = len(plan.sessions)
    for i, pair in enumerate(rng.sample(PAIR, PER_KIND)):
        first = rng.randrange(n - 2)
        second = rng.randrange(first + 2, n)
        plan.put(first, Say(rng.choice(pair.first), f"pair{i}a"))
        plan.put(second, Say(rng.choice(pair.second), f"pair{i}b"))
        for near in pair.near:
            plan.put(rng.randrange(n), Say(near))
        _ask(plan, "pair", rng.choice(pair.ask), [f"pair{i}a", f"pair{i}b"])


def _when(rng: random.Random, plan: Plan) -> None:
    n = len(plan.sessions)
    done: list[dict[int, str]] = []  # per session: activity index → evidence key
    habits = rng.sample(range(len(ACTIVITIES)), 6)  # a person does the same things often
    for s in range(n):
        chosen: dict[int, str] = {}
        for a in rng.sample(habits, rng.randint(2, 4)):
            act = ACTIVITIES[a]
            value = rng.choice(act.values)
            key = f"act{s}-{a}"
            plan.put(s, Say(rng.choice(act.report).format(x=value), key, value))
            chosen[a] = key
        done.append(chosen)
    anchors = rng.sample(ANCHORS, PER_KIND)
    used: set[int] = set()
    for i in range(PER_KIND):
        target = rng.choice([s for s in range(n) if s not in used])
        used.add(target)
        a, key = rng.choice(sorted(done[target].items()))
        if rng.random() < 0.25:
            d = plan.dates[target]
            when = rng.choice(
                (f"on {d:%B} {d.day}", f"on {d:%A}, {d:%B} {d.day}", f"on {d.day} {d:%B}")
            )
        else:
            near = [
                s
                for s in range(n)
                if s != target and abs((plan.dates[s] - plan.dates[target]).days) <= 28
            ]
            anchor = rng.choice(near or [s for s in range(n) if s != target])
            statement, phrase = anchors[i]
            plan.put(anchor, Say(statement))
            when = f"{_relation(plan.dates[anchor], plan.dates[target], rng)} {phrase}"
        _ask(plan, "when", ACTIVITIES[a].ask.format(when=when), [key])


def _relation(anchor: datetime, target: datetime, rng: random.Random) -> str:
    """How `target`'s day is said from `anchor`'s: "the Tuesday after", "two weeks before"…"""
    days = (target.date() - anchor.date()).days
    side = "after" if days > 0 else "before"
    gap = abs(days)
    if gap == 0:
        return "the same day"
    if gap == 1:
        return f"the day {side}"
    if gap % 7 == 0 and gap // 7 < len(NUMBERS):
        weeks = gap // 7
        return "a week " + side if weeks == 1 else f"{NUMBERS[weeks]} weeks {side}"
    if gap < 7 and rng.random() < 0.7:
        return f"the {WEEKDAYS[target.weekday()]} {side}"
    return f"{gap} days {side}"


def _who(rng: random.Random, plan: Plan) -> None:
    n = len(plan.sessions)
    people = rng.sample(RELATIVES, PER_KIND)
    names_f, names_m = rng.sample(FEMALE, PER_KIND), rng.sample(MALE, PER_KIND)
    news = rng.sample(NEWS, PER_KIND)
    for i, rel in enumerate(people):
        gender = rel.gender if rel.gender != "x" else rng.choice("fm")
        name = names_f[i] if gender == "f" else names_m[i]
        intro = rng.choice(INTRO).format(role=rel.role, name=name, tail=rng.choice(INTRO_TAIL))
        plan.put(rng.randrange(2), Say(intro))
        plan.put(rng.randrange(n), Say(f"{name} says hi, by the way."))
        item = news[i]
        value, other = rng.sample(item.values, 2)
        pos, subj, obj = ("her", "She", "her") if gender == "f" else ("his", "He", "him")
        said = rng.choice(item.say)
        key = f"who{i}"
        if rng.random() < 0.5:
            text = said.format(who=f"My {rel.role}", pos=pos, x=value)
            plan.put(rng.randrange(2, n), Say(text, key, value))
        else:
            lead = rng.choice(LEAD_IN).format(role=rel.role)
            news_turn = Say(said.format(who=subj, pos=pos, x=value), key, value)
            reply = rng.choice(LEAD_REPLY).format(obj=obj)
            plan.put(rng.randrange(2, n), Say(lead, reply=reply, then=[news_turn]))
        # Someone else's news of the same kind: the words match, the person does not.
        other_rel = people[(i + 1) % PER_KIND]
        text = rng.choice(item.say).format(who=f"My {other_rel.role}", pos="their", x=other)
        plan.put(rng.randrange(n), Say(text))
        _ask(plan, "who", item.ask.format(name=name), [key])


def _render(rng: random.Random, plan: Plan, out: list[dict]) -> dict[str, str]:  # type: ignore[type-arg]
    """Append the plan's turns to `out`; returns evidence key → turn id."""
    evidence: dict[str, str] = {}
    for s, items in enumerate(plan.sessions):
        talk = [Say(t) for t in rng.sample(SMALL_TALK, max(0, rng.randint(16, 20) - len(items)))]
        order = items + talk
        rng.shuffle(order)
        clock = plan.dates[s]
        t = 0
        for say in order:
            for part in [say, *say.then]:
                for role in ("user", "assistant"):
                    turn_id = f"{plan.conv}-s{s:02d}-t{t:03d}"
                    text = part.text if role == "user" else part.reply or _reply(rng, part)
                    out.append({"id": turn_id, "content": text, "timestamp": clock.isoformat(),
                                "project": plan.conv, "role": role, "session": s})  # fmt: skip
                    t += 1
                    clock += timedelta(minutes=rng.randint(1, 3))
                    if role == "user" and part.key is not None:
                        evidence[part.key] = turn_id
    return evidence


def _reply(rng: random.Random, say: Say) -> str:
    if say.key is None or rng.random() < 0.4:
        return rng.choice(ASSISTANT)
    hidden = {w.lower().strip(".,!?") for w in say.hide.split()}
    words = [w.strip(".,!?:") for w in say.text.split()]
    topic = [w for w in words if len(w) > 3 and w.lower() not in hidden][:3]
    return rng.choice(ECHO).format(topic=" ".join(topic) or "that")


def write(folder: Path = DATA) -> dict[str, str]:
    """Write turns.jsonl and questions.jsonl; returns each file's sha256."""
    turns, questions = generate()
    folder.mkdir(parents=True, exist_ok=True)
    sums = {}
    for name, rows in (("turns.jsonl", turns), ("questions.jsonl", questions)):
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (folder / name).write_text(text, encoding="utf-8")
        sums[name] = hashlib.sha256(text.encode()).hexdigest()
    return sums


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="regenerate bench/data/recall")
    args = parser.parse_args()
    turns, questions = generate()
    if args.write:
        for name, digest in write().items():
            print(f"{DATA / name}: sha256 {digest}")
    print(f"{len(turns)} turns, {len(questions)} questions")


if __name__ == "__main__":
    main()
