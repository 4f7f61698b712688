"""Days a question points at: "on March 14", "last Tuesday", "the Tuesday after we
talked about the kitchen", "two weeks before my trip".

`parse` cuts the time phrase out of a question: what is left is what to look for,
and a relative phrase names an *anchor* (the talk it is counted from). `resolve`
turns the phrase into a window of days once the anchor's day is known (the
retriever finds it by searching for the anchor's words). Days are UTC dates, as
memories' times are stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3,
}  # fmt: skip
_DAY = "|".join(WEEKDAYS)
_MONTH = "|".join(m for m in MONTHS) + "|" + "|".join(m[:3] for m in MONTHS) + "|sept"
_COUNT = r"\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True))

_RELATIVE = re.compile(
    rf"\b(?:(?P<day>the day)|the (?P<weekday>{_DAY})|(?P<week>the week(?:end)?)"
    rf"|(?P<count>{_COUNT}) (?P<unit>days?|weeks?|months?))"
    r"\s+(?P<side>after|before)\s+(?P<anchor>.+?)\s*[?.!]*$",
    re.IGNORECASE,
)
_ABSOLUTE = re.compile(
    rf"\b(?:on |in )?(?:(?:{_DAY}),?\s+)?(?:"
    rf"(?P<month>{_MONTH})\.? (?P<mday>\d{{1,2}})(?:st|nd|rd|th)?(?:,? (?P<year>\d{{4}}))?"
    rf"|(?P<mday2>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?(?P<month2>{_MONTH})\.?"
    r"(?:,? (?P<year2>\d{4}))?"
    r"|(?P<iso>\d{4}-\d{2}-\d{2}))\b",
    re.IGNORECASE,
)
_AGO = re.compile(
    rf"\b(?:(?P<yesterday>yesterday)|last (?P<weekday>{_DAY})"
    rf"|(?P<count>{_COUNT}) (?P<unit>days?|weeks?) ago)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TimeAsk:
    """A question's time phrase: `rest` is the question without it."""

    rest: str
    anchor: str | None = None  # words of the talk a relative day is counted from
    side: int = 0  # +1 after the anchor, -1 before
    unit: str = ""  # "day", "weekday", "week", "weekend", "days", "weeks", "months"
    count: int = 0  # days/weeks/months, or the weekday's index
    day: date | None = None  # an absolute day (or one counted back from `at`)


@dataclass(frozen=True)
class Window:
    """Days [first, last] (UTC) a question points at."""

    first: date
    last: date

    def start(self) -> datetime:
        return datetime.combine(self.first, time.min, UTC)

    def end(self) -> datetime:
        return datetime.combine(self.last + timedelta(days=1), time.min, UTC)

    def fit(self, when: datetime) -> float:
        """1 inside the window, halving with each day outside it."""
        d = when.astimezone(UTC).date()
        off = (self.first - d).days if d < self.first else (d - self.last).days
        return 1.0 if off <= 0 else 0.5**off


def parse(question: str, at: datetime) -> TimeAsk | None:
    """The time phrase of `question` (asked at `at`), or None if it has none."""
    if m := _RELATIVE.search(question):
        rest = question[: m.start()].strip()
        side = 1 if m["side"].lower() == "after" else -1
        if m["day"]:
            unit, count = "day", 1
        elif m["weekday"]:
            unit, count = "weekday", WEEKDAYS.index(m["weekday"].lower())
        elif m["week"]:
            unit, count = ("weekend" if m["week"].lower().endswith("end") else "week"), 1
        else:
            unit = m["unit"].lower().rstrip("s") + "s"
            count = _count(m["count"])
        return TimeAsk(rest, m["anchor"], side, unit, count)
    if m := _ABSOLUTE.search(question):
        day = _absolute(m, at.astimezone(UTC).date())
        if day is not None:
            return TimeAsk(_cut(question, m), day=day)
    if m := _AGO.search(question):
        today = at.astimezone(UTC).date()
        if m["yesterday"]:
            day = today - timedelta(days=1)
        elif m["weekday"]:
            back = (today.weekday() - WEEKDAYS.index(m["weekday"].lower())) % 7 or 7
            day = today - timedelta(days=back)
        else:
            n = _count(m["count"])
            day = today - timedelta(days=n * (7 if m["unit"].lower().startswith("w") else 1))
        return TimeAsk(_cut(question, m), day=day)
    return None


def resolve(ask: TimeAsk, anchor_day: date | None) -> Window | None:
    """The days `ask` points at, given its anchor's day (None: not found, or past the
    calendar's ends: "999 months after", "December 31, 9999")."""
    try:
        window = _resolve(ask, anchor_day)
        if window is not None:
            window.end()
        return window
    except OverflowError:
        return None


def _resolve(ask: TimeAsk, anchor_day: date | None) -> Window | None:
    if ask.day is not None:
        return Window(ask.day, ask.day)
    if anchor_day is None:
        return None
    s = ask.side
    if ask.unit == "day":
        d = anchor_day + timedelta(days=s)
        return Window(d, d)
    if ask.unit == "weekday":
        wd = anchor_day.weekday()
        step = (ask.count - wd) % 7 if s > 0 else (wd - ask.count) % 7
        d = anchor_day + timedelta(days=s * (step or 7))
        return Window(d, d)
    if ask.unit == "week":
        near, far = anchor_day + timedelta(days=s), anchor_day + timedelta(days=7 * s)
        return Window(min(near, far), max(near, far))
    if ask.unit == "weekend":  # the Saturday and Sunday after (or before) the anchor's day
        if s > 0:
            sat = anchor_day + timedelta(days=(5 - anchor_day.weekday()) % 7 or 7)
        else:
            sat = anchor_day - timedelta(days=(anchor_day.weekday() - 6) % 7 or 7) - timedelta(1)
        return Window(sat, sat + timedelta(days=1))
    days = ask.count * {"days": 1, "weeks": 7, "months": 30}[ask.unit]
    slack = {"days": 0, "weeks": 1, "months": 3}[ask.unit]  # "two weeks" is seldom 14 days sharp
    d = anchor_day + timedelta(days=s * days)
    return Window(d - timedelta(days=slack), d + timedelta(days=slack))


def _count(text: str) -> int:
    t = text.lower()
    return int(t) if t.isdigit() else _NUMBERS.get(t, 1)


def _cut(question: str, m: re.Match[str]) -> str:
    return (question[: m.start()] + " " + question[m.end() :]).strip()


def _absolute(m: re.Match[str], today: date) -> date | None:
    """The day an absolute phrase names; without a year, the last such day up to `today`."""
    try:
        if m["iso"]:
            return date.fromisoformat(m["iso"])
        month_name = (m["month"] or m["month2"]).lower()[:3]
        month = [n[:3] for n in MONTHS].index(month_name) + 1
        mday = int(m["mday"] or m["mday2"])
        year = m["year"] or m["year2"]
        if year:
            return date(int(year), month, mday)
        found = date(today.year, month, mday)
        return found if found <= today else date(today.year - 1, month, mday)
    except ValueError:  # February 30th
        return None
