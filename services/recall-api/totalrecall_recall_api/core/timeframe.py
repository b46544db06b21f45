"""Which tiers to search and from when, for a timeframe."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, Protocol

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


def visible_until(as_of: datetime | None) -> datetime | None:
    """The newest moment a question asked `asOf` may see: the end of the asking day.

    Same-day rule: the asking day's memories count, whatever their hour. LongMemEval (the
    benchmark that asks as of a date) stamps the turns of the asking day's sessions after the
    minute its question date names (6 of 48 dev questions; one gold turn): a strict cut would
    hide the conversation the question is about. Later days never show."""
    if as_of is None:
        return None
    return datetime.combine(as_of.date(), time.max, tzinfo=as_of.tzinfo or UTC)


class Dated(Protocol):
    @property
    def timestamp(self) -> datetime: ...


def after_asking(m: Dated, as_of: datetime | None) -> bool:
    """A memory from the future of the asking day (`asOf`): never shown."""
    until = visible_until(as_of)
    return until is not None and m.timestamp > until
