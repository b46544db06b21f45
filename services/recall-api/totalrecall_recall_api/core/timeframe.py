"""Which tiers to search and from when, for a timeframe."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from totalrecall_schema import TIMEFRAMES, Tier, TierPolicy

#: The defaults; a service passes the policy it read (`Settings.tier_policy`).
DEFAULT_POLICY = TierPolicy()


@dataclass(frozen=True)
class SearchPlan:
    since: datetime | None
    first_tiers: tuple[Tier, ...]
    escalation_tiers: tuple[Tier, ...]  # searched only if the first tiers lack good matches


_TIERS: tuple[Tier, ...] = ("hot", "warm", "cold")


def tiers_reaching(oldest: datetime, clock: datetime,
                   policy: TierPolicy = DEFAULT_POLICY) -> tuple[Tier, ...]:
    """The tiers that hold memories from `oldest` up to now (tiers go by age on the clock)."""
    return policy.tiers_reaching((clock - oldest).total_seconds())


def plan(timeframe: str, now: datetime, *, clock: datetime | None = None,
         named: date | Literal[False] | None = False,
         policy: TierPolicy = DEFAULT_POLICY) -> SearchPlan:
    """`now`: the moment the question is asked (timeframes count back from it); `clock`: the
    real time, which decides the tiers (a question asked "as of" last year needs the cold
    tier); `named`: the earliest day the query names (None when it names one of any year,
    False when it names none). For "auto", the hot tier goes first unless the query names an
    older day; the other tiers are searched when the first lack good matches. `policy`: the
    tier ages the indexer moves memories by."""
    clock = clock or now
    if timeframe == "auto":
        if named is None:
            return SearchPlan(None, _TIERS, ())
        oldest = now - timedelta(seconds=policy.hot_max_age_s)
        if named is not False:
            oldest = min(oldest, datetime.combine(named, time.min, tzinfo=UTC))
        first = tiers_reaching(oldest, clock, policy)
        return SearchPlan(None, first, tuple(t for t in _TIERS if t not in first))
    span = TIMEFRAMES[timeframe]
    if span is None:
        return SearchPlan(None, _TIERS, ())
    since = now - span
    return SearchPlan(since, tiers_reaching(since, clock, policy), ())
