"""Dates named in a query ("in July 2023", "on October 13", "last Saturday", "two weeks ago"),
without an LLM.

Keyword and vector search both miss them: a memory's date is its timestamp, not its words. So
the dates a query names become a small boost for the memories stamped on them, and tell recall
which tiers hold them. A part left unnamed matches anything ("in July": July of any year),
because the query's words do not say which year and the memories may not be from this one.
Relative dates ("yesterday", "last month", "3 days ago", "in the past two weeks") are resolved
against the moment the question is asked; loose ones ("a week ago") match a few days either side.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from .fusion import Candidate

_MONTHS = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}
_MONTHS.update({name[:3]: i for name, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

# Most specific first; each match's span is consumed so "October 13, 2023" is one date, not three.
_PATTERNS = [re.compile(p, re.IGNORECASE) for p in (
    rf"\b{_MONTH}\s+{_DAY}\b(?:,?\s+{_YEAR}\b)?",             # October 13, 2023 / May 8
    rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b(?:,?\s+{_YEAR}\b)?",   # 13 October 2023 / 8th of May
    rf"\b{_MONTH},?\s+{_YEAR}\b",                              # July 2023
    rf"\b(?:in|on|during|since|until|till|before|after|by|of|early|late|mid)\s+(?:-\s*)?{_MONTH}\b",
    rf"\b{_YEAR}\b",                                           # 2022
    r"\b(?P<rel>today|yesterday)\b",
)]
# A month named without a day or year counts only after a preposition ("may", "march" are also
# ordinary words), and only spelt out: "in dec" is too likely something else.
_SPELT_OUT = {name for name in _MONTHS if len(name) > 4} | {"may", "june", "july"}


@dataclass(frozen=True)
class DateRef:
    """A calendar date with wildcards: None matches any year / month / day."""

    year: int | None = None
    month: int | None = None
    day: int | None = None

    def matches(self, ts: datetime) -> bool:
        return ((self.year is None or ts.year == self.year)
                and (self.month is None or ts.month == self.month)
                and (self.day is None or ts.day == self.day))

    @property
    def earliest(self) -> date | None:
        """The first day it can match; None when the year is left open."""
        if self.year is None:
            return None
        return date(self.year, self.month or 1, self.day or 1)


@dataclass(frozen=True)
class DateSpan:
    """The days from `first` to `last`, both included ("last week", "3 days ago" ± 1 day)."""

    first: date
    last: date

    def matches(self, ts: datetime) -> bool:
        return self.first <= ts.date() <= self.last

    @property
    def earliest(self) -> date:
        return self.first


DateMatch = DateRef | DateSpan

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
            "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3}
_COUNT = r"(?P<n>\d{1,3}|" + "|".join(sorted(map(re.escape, _NUMBERS), key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_WEEKDAYS = {name: i for i, name in enumerate(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"

# Relative expressions, most specific first (each match's span is consumed, as below).
_RELATIVE = [re.compile(p, re.IGNORECASE) for p in (
    r"\b(?P<before>the\s+day\s+before\s+yesterday)\b",
    rf"\b(?:in|over|during|within|for|from)\s+the\s+(?:last|past|previous)\s+(?:{_COUNT}\s+)?"
    rf"{_UNIT}\b",                                                  # in the past 3 months
    rf"\b(?:the\s+)?past\s+{_COUNT}\s+{_UNIT}\b",                 # past two weeks
    rf"\b{_COUNT}\s+{_UNIT}\s+ago\b",                              # 3 days ago, a week ago
    r"\b(?P<which>last|this)\s+(?P<period>week|weekend|month|year)\b",  # last month
    rf"\b(?:last|this\s+past|past|on|this)\s+{_WEEKDAY}\b",         # last Saturday
    r"\b(?P<night>last\s+night)\b",
    r"\b(?P<today>this\s+(?:morning|afternoon|evening)|tonight|earlier\s+today)\b",
)]


def _count(text: str) -> int:
    text = " ".join(text.lower().split())
    return int(text) if text.isdigit() else _NUMBERS[text]


def _month_start(d: date, months_back: int) -> date:
    y, m = divmod(d.year * 12 + d.month - 1 - months_back, 12)
    return date(y, m + 1, 1)


def _relative(m: re.Match[str], today: date) -> DateMatch:
    g = {k: v for k, v in m.groupdict().items() if v}
    day = timedelta(days=1)
    if "before" in g:
        d = today - 2 * day
        return DateRef(d.year, d.month, d.day)
    if "night" in g:
        return DateSpan(today - day, today)
    if "today" in g:
        return DateRef(today.year, today.month, today.day)
    if "weekday" in g:  # the last such day before today
        back = (today.weekday() - _WEEKDAYS[g["weekday"].lower()]) % 7 or 7
        d = today - back * day
        return DateRef(d.year, d.month, d.day)
    if "period" in g:
        period, this = g["period"].lower(), g["which"].lower() == "this"
        if period == "week":
            monday = today - today.weekday() * day
            return (DateSpan(monday, today) if this
                    else DateSpan(monday - 7 * day, monday - day))
        if period == "weekend":  # the last Saturday and Sunday before today
            saturday = today - ((today.weekday() - 5) % 7 or 7) * day
            return DateSpan(saturday, min(saturday + day, today))
        if period == "month":
            first = _month_start(today, 0 if this else 1)
            return DateRef(first.year, first.month, None)
        return DateRef(today.year - (0 if this else 1), None, None)
    n = _count(g.get("n", "1"))
    unit = g["unit"].lower()
    if not m.group(0).lower().endswith("ago"):  # a window up to today: "in the past 3 months"
        if unit == "year":
            return DateSpan(date(today.year - n, today.month, min(today.day, 28)), today)
        first = (_month_start(today, n) if unit == "month"
                 else today - n * (7 if unit == "week" else 1) * day)
        return DateSpan(first, today)
    if unit == "year":
        return DateRef(today.year - n, None, None)
    # "N units ago" is said loosely: a few days either side, more for longer spans.
    days, slack = {"day": (n, 1), "week": (7 * n, 3), "month": (30 * n, 10)}[unit]
    d = today - days * day
    return DateSpan(d - slack * day, min(d + slack * day, today))


def date_refs(query: str, now: datetime) -> list[DateMatch]:
    """The dates `query` names (relative ones resolved against `now`), in no particular order."""
    refs: list[DateMatch] = []
    text = query
    today = now.date()
    for pat in _RELATIVE:
        refs += [_relative(m, today) for m in pat.finditer(text)]
        text = pat.sub(lambda m: " " * len(m.group(0)), text)
    for pat in _PATTERNS:
        for m in pat.finditer(text):
            g = m.groupdict()
            if g.get("rel"):
                day = now - timedelta(days=1 if g["rel"].lower() == "yesterday" else 0)
                refs.append(DateRef(day.year, day.month, day.day))
            else:
                month = g.get("month")
                alone = month is not None and not (g.get("day") or g.get("year"))
                if alone and str(month).lower() not in _SPELT_OUT:
                    continue
                day_n = int(g["day"]) if g.get("day") else None
                if day_n is not None and not 1 <= day_n <= 31:
                    continue
                refs.append(DateRef(int(g["year"]) if g.get("year") else None,
                                    _MONTHS[month.lower()] if month else None, day_n))
        text = pat.sub(lambda m: " " * len(m.group(0)), text)  # consumed: not matched again
    return list(dict.fromkeys(refs))


def earliest_day(refs: Sequence[DateMatch]) -> date | None:
    """The first day any of `refs` can match; None when one leaves its year open."""
    days = [r.earliest for r in refs]
    return None if any(d is None for d in days) else min(d for d in days if d is not None)


def boost_dated(cands: Iterable[Candidate], refs: Sequence[DateMatch], boost: float) -> None:
    """Adds `boost` to the score of each candidate stamped on a date the query names."""
    if not refs or boost <= 0:
        return
    for c in cands:
        if any(r.matches(c.timestamp) for r in refs):
            c.components["date"] = boost
            c.score += boost
