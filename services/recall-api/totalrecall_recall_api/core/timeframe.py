"""Which tiers to search and from when, for a timeframe."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from totalrecall_schema import TIMEFRAMES, Tier

HOT_SPAN = timedelta(hours=24)
WARM_SPAN = timedelta(days=90)


@dataclass(frozen=True)
class SearchPlan:
    since: datetime | None
    first_tiers: tuple[Tier, ...]
    escalation_tiers: tuple[Tier, ...]  # searched only if the first tiers lack good matches


_TIERS: tuple[Tier, ...] = ("hot", "warm", "cold")


def tiers_reaching(oldest: datetime, clock: datetime) -> tuple[Tier, ...]:
    """The tiers that hold memories from `oldest` up to now (tiers go by age on the clock)."""
    age = clock - oldest
    if age <= HOT_SPAN:
        return ("hot",)
    if age <= WARM_SPAN:
        return ("hot", "warm")
    return _TIERS


def plan(timeframe: str, now: datetime, *, clock: datetime | None = None,
         named: date | Literal[False] | None = False) -> SearchPlan:
    """`now`: the moment the question is asked (timeframes count back from it); `clock`: the
    real time, which decides the tiers (a question asked "as of" last year needs the cold
    tier); `named`: the earliest day the query names (None when it names one of any year,
    False when it names none). For "auto", the hot tier goes first unless the query names an
    older day; the other tiers are searched when the first lack good matches."""
    clock = clock or now
    if timeframe == "auto":
        if named is None:
            return SearchPlan(None, _TIERS, ())
        oldest = now - HOT_SPAN
        if named is not False:
            oldest = min(oldest, datetime.combine(named, time.min, tzinfo=UTC))
        first = tiers_reaching(oldest, clock)
        return SearchPlan(None, first, tuple(t for t in _TIERS if t not in first))
    span = TIMEFRAMES[timeframe]
    if span is None:
        return SearchPlan(None, _TIERS, ())
    since = now - span
    return SearchPlan(since, tiers_reaching(since, clock), ())
