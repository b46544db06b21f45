"""Which tiers to search and from when, for a timeframe."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from totalrecall_schema import TIMEFRAMES, Tier

HOT_SPAN = timedelta(hours=24)
WARM_SPAN = timedelta(days=90)


@dataclass(frozen=True)
class SearchPlan:
    since: datetime | None
    first_tiers: tuple[Tier, ...]
    escalation_tiers: tuple[Tier, ...]  # searched only if the first tiers lack good matches


def plan(timeframe: str, now: datetime) -> SearchPlan:
    if timeframe == "auto":
        return SearchPlan(None, ("hot",), ("warm", "cold"))
    span = TIMEFRAMES[timeframe]
    if span is None:
        return SearchPlan(None, ("hot", "warm", "cold"), ())
    since = now - span
    if span <= HOT_SPAN:
        return SearchPlan(since, ("hot",), ())
    if span <= WARM_SPAN:
        return SearchPlan(since, ("hot", "warm"), ())
    return SearchPlan(since, ("hot", "warm", "cold"), ())
