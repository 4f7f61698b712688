"""How much a memory matters, 0–1: a free heuristic by default, or a model, batched.

The heuristic rewards what tends to be worth remembering — decisions, failures,
preferences, commitments, concrete facts (names, numbers, dates) stated about
oneself — and marks down chit-chat and bare questions. The agent's own model later
rates many such memories in one call (`hivemind.ltm.rating`).
"""

from __future__ import annotations

import re

from hivemind.ltm.analysis import words

_STRONG_TEXT = """important critical urgent must never always decided decision agreed deadline
fail failed failure error broke broken bug fixed fix crash lost security password secret risk
warning blocked"""
_FACT_TEXT = """prefer preference favourite favorite love hate allergic allergy birthday anniversary
married moved bought sold started quit joined graduated diagnosed named called live lives work
works job plan planning schedule appointment budget goal promise promised remember learned
realised realized"""
_SMALL_TALK_TEXT = """hi hello hey thanks thank ok okay cool great nice lol sure bye goodbye yes
no yeah sounds good"""
_SIGNALS: tuple[tuple[float, frozenset[str]], ...] = (
    (0.15, frozenset(_STRONG_TEXT.split())),
    (0.08, frozenset(_FACT_TEXT.split())),
)
_FIRST_PERSON = frozenset({"i", "my", "we", "our", "me", "mine"})
_SMALL_TALK = frozenset(_SMALL_TALK_TEXT.split())
_NUMBER = re.compile(r"\d")
# A capitalised word that does not start a sentence: a name, a place, a product.
_NAME = re.compile(r"[^.!?:\s]\s+[A-Z][a-z]")


def heuristic_importance(text: str) -> float:
    """A 0–1 importance from the text alone; cheap enough for every write."""
    tokens = words(text)
    if not tokens:
        return 0.0
    score = 0.3
    if len(tokens) >= 8:
        score += 0.05
    if len(tokens) >= 25:
        score += 0.05
    vocabulary = set(tokens)
    for weight, signal in _SIGNALS:
        score += weight * min(2, len(vocabulary & signal))
    if vocabulary & _FIRST_PERSON:
        score += 0.05
    if _NUMBER.search(text):
        score += 0.05
    if _NAME.search(text):
        score += 0.05
    if vocabulary <= _SMALL_TALK or len(tokens) <= 2:
        score -= 0.2
    if text.rstrip().endswith("?") and len(tokens) < 12:
        score -= 0.1
    return round(min(1.0, max(0.0, score)), 3)


def scale_points(importance: float) -> float:
    """Importance on the 1–10 scale of reflection thresholds (0 → 1, 1 → 10)."""
    return 1.0 + 9.0 * importance

