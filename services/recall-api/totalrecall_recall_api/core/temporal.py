"""Dates named in a query ("in July 2023", "on October 13", "yesterday"), without an LLM.

Keyword and vector search both miss them: a memory's date is its timestamp, not its words. So
the dates a query names become a small boost for the memories stamped on them. A part left
unnamed matches anything ("in July": July of any year), because the query's words do not say
which year and the memories may not be from this one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

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


def date_refs(query: str, now: datetime) -> list[DateRef]:
    """The dates `query` names (relative ones resolved against `now`), in no particular order."""
    refs: list[DateRef] = []
    text = query
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


def boost_dated(cands: Iterable[Candidate], refs: Sequence[DateRef], boost: float) -> None:
    """Adds `boost` to the score of each candidate stamped on a date the query names."""
    if not refs or boost <= 0:
        return
    for c in cands:
        if any(r.matches(c.timestamp) for r in refs):
            c.components["date"] = boost
            c.score += boost
