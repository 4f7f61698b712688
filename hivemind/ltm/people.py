"""People named in a question, and the roles memories give them ("my sister Ana").

A question names "Ana"; later memories say "my sister" or "she". `names` finds the
capitalised words of a question that may be people; `roles` reads, in memories
that mention a name, the role the speaker gives that person ("my sister Ana",
"Ana, my sister", "Ana … That's my sister"), so the retriever can look for the
role's words too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hivemind.ltm.analysis import QUESTION_WORDS, STOP_WORDS
from hivemind.ltm.when import MONTHS, WEEKDAYS

# Roles people are called by in conversation; "my <role>" names a person.
_ROLE_TEXT = """
mom mum mother dad father parents sister brother sibling wife husband partner spouse
fiance fiancee boyfriend girlfriend son daughter kid kids child children baby
aunt uncle cousin niece nephew grandma grandmother granny gran grandpa grandfather
grandson granddaughter stepmom stepdad stepmother stepfather stepsister stepbrother
friend roommate flatmate housemate neighbour neighbor boss manager coworker colleague
teammate classmate teacher mentor student doctor therapist coach landlord landlady
ex bestie
"""
ROLES: frozenset[str] = frozenset(_ROLE_TEXT.split())
_ROLE = r"(?:best |old |close |little |big |older |younger |twin |step)?(?P<role>[a-z]+)"
_NOT_NAMES = STOP_WORDS | QUESTION_WORDS | frozenset((*WEEKDAYS, *MONTHS))
_NAME = re.compile(r"\b[A-Z][a-z]+(?:-[A-Z][a-z]+)?\b")


def names(question: str) -> list[str]:
    """Capitalised words of `question` that may be people's names, in order."""
    found = [w for w in _NAME.findall(question) if w.lower() not in _NOT_NAMES]
    return list(dict.fromkeys(found))


def _patterns(name: str) -> list[re.Pattern[str]]:
    n = re.escape(name)
    return [
        re.compile(rf"\bmy {_ROLE},? {n}\b", re.IGNORECASE),
        re.compile(rf"\b{n}\s*(?:,|\(|-|\bis\b|\bwas\b)\s*my {_ROLE}\b", re.IGNORECASE),
        re.compile(
            rf"\b{n}\b[^.!?\n]{{0,80}}[.!?]\s+(?:that's|that is|she's|he's|they're) my {_ROLE}\b",
            re.IGNORECASE,
        ),
    ]


def roles(name: str, texts: Iterable[str]) -> list[str]:
    """The roles `texts` give `name` ("sister"), most said first."""
    count: dict[str, int] = {}
    patterns = _patterns(name)
    for text in texts:
        for p in patterns:
            for m in p.finditer(text):
                role = m["role"].lower()
                if role in ROLES:
                    count[role] = count.get(role, 0) + 1
    return sorted(count, key=lambda r: -count[r])
