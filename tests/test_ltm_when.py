"""Days a question points at: absolute, counted back from now, or from another talk."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from hivemind.ltm.when import Window, parse, resolve

ASKED = datetime(2023, 8, 10, 9, 0, tzinfo=UTC)  # a Thursday
ANCHOR = date(2023, 8, 2)  # a Wednesday


@pytest.mark.parametrize(
    ("question", "rest", "anchor", "first", "last"),
    [
        ("What did I cook the Tuesday after we talked about the kitchen?", "What did I cook",
         "we talked about the kitchen", date(2023, 8, 8), date(2023, 8, 8)),
        ("What did I read the Tuesday before I lost my wallet?", "What did I read",
         "I lost my wallet", date(2023, 8, 1), date(2023, 8, 1)),
        ("Where did I eat the day after the flood?", "Where did I eat", "the flood",
         date(2023, 8, 3), date(2023, 8, 3)),
        ("How far did I run two weeks before the trip?", "How far did I run", "the trip",
         date(2023, 7, 18), date(2023, 7, 20)),
        ("What did I buy 5 days after my birthday?", "What did I buy", "my birthday",
         date(2023, 8, 7), date(2023, 8, 7)),
        ("What did I do the weekend after my birthday?", "What did I do", "my birthday",
         date(2023, 8, 5), date(2023, 8, 6)),
    ],
    ids=["weekday-after", "weekday-before", "day-after", "weeks-before", "days-after", "weekend"],
)  # fmt: skip
def test_a_day_counted_from_another_talk(
    question: str, rest: str, anchor: str, first: date, last: date
) -> None:
    ask = parse(question, ASKED)
    assert ask is not None and ask.rest == rest and ask.anchor == anchor
    assert resolve(ask, ANCHOR) == Window(first, last)


@pytest.mark.parametrize(
    ("question", "day"),
    [
        ("What did I bake on July 17?", date(2023, 7, 17)),
        ("Who did I call on 25 July?", date(2023, 7, 25)),
        ("What did I cook on Friday, July 21?", date(2023, 7, 21)),
        ("What happened on December 24?", date(2022, 12, 24)),  # no year: the last one
        ("What did I do on 2021-03-04?", date(2021, 3, 4)),
        ("What did I eat last Tuesday?", date(2023, 8, 8)),
        ("What did I buy yesterday?", date(2023, 8, 9)),
        ("What did I watch three days ago?", date(2023, 8, 7)),
    ],
    ids=["month-day", "day-month", "weekday-date", "last-year", "iso", "last-weekday",
         "yesterday", "days-ago"],
)  # fmt: skip
def test_a_named_day(question: str, day: date) -> None:
    ask = parse(question, ASKED)
    assert ask is not None and ask.anchor is None
    assert resolve(ask, None) == Window(day, day)


def test_a_question_without_a_day_has_no_time_phrase() -> None:
    assert parse("Where does my grandmother live?", ASKED) is None
    assert parse("What did I say after the meeting?", ASKED) is None


def test_an_impossible_date_is_no_day() -> None:
    assert parse("What did I do on February 30?", ASKED) is None


@pytest.mark.parametrize(
    "question",
    ["What happened on December 31, 9999?", "What did I do 999 months after the party?"],
    ids=["last-day", "months"],
)
def test_a_day_past_the_calendar_is_no_window(question: str) -> None:
    ask = parse(question, ASKED)
    assert ask is not None and resolve(ask, date(9999, 12, 1)) is None


def test_an_anchor_not_found_gives_no_window() -> None:
    ask = parse("What did I cook the day after the flood?", ASKED)
    assert ask is not None and resolve(ask, None) is None


def test_fit_is_one_inside_and_halves_each_day_outside() -> None:
    w = Window(date(2023, 8, 8), date(2023, 8, 8))
    assert w.fit(datetime(2023, 8, 8, 23, 59, tzinfo=UTC)) == 1.0
    assert w.fit(datetime(2023, 8, 9, 1, tzinfo=UTC)) == 0.5
    assert w.fit(datetime(2023, 8, 5, tzinfo=UTC)) == 0.125
