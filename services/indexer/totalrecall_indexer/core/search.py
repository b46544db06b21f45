"""Pure search helpers: tier assignment, zvec filter strings, fusion of per-tier hits."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from totalrecall_schema import Tier, TierPolicy, VectorFilter, VectorHit
from totalrecall_schema.tiers import HOT_MAX_AGE_S, TIERS, WARM_MAX_AGE_S

__all__ = ["HOT_MAX_AGE_S", "TIERS", "WARM_MAX_AGE_S"]

#: Characters a filter value may contain: what namespaces, categories and severities use.
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.:@/+= -]{1,200}$")


def tier_for_age(ts_ms: int, now_ms: int, hot_max_age_s: float = HOT_MAX_AGE_S,
                 warm_max_age_s: float = WARM_MAX_AGE_S) -> Tier:
    """Where a memory of this age belongs (the schema's tier policy)."""
    return TierPolicy(hot_max_age_s, warm_max_age_s).tier_for_age((now_ms - ts_ms) / 1000.0)


def _checked(value: str) -> str:
    if not _SAFE_VALUE.match(value):
        raise ValueError(f"unsupported character in filter value {value[:40]!r}")
    return value


@dataclass(frozen=True)
class TierFilter:
    """A search's filter, checked: zvec gets it as a string (`zvec`), the in-memory mirror of a
    tier (`adapters.vector_mirror`) as these fields."""

    namespace: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    categories: tuple[str, ...] | None = None
    severities: tuple[str, ...] | None = None

    def zvec(self) -> str:
        """The zvec filter expression (zvec wants `=`, not `==`)."""
        parts = [] if self.namespace is None else [f"namespace = '{self.namespace}'"]
        if self.since_ms is not None:
            parts.append(f"ts >= {self.since_ms}")
        if self.until_ms is not None:
            parts.append(f"ts <= {self.until_ms}")
        for name, values in (("category", self.categories), ("severity", self.severities)):
            if values is not None:
                quoted = ", ".join(f"'{v}'" for v in values)
                parts.append(f"{name} IN ({quoted})")
        return " and ".join(parts)


def tier_filter(flt: VectorFilter) -> TierFilter:
    """Checks a VectorFilter's values (they are pasted into zvec's filter string)."""
    lists: dict[str, tuple[str, ...] | None] = {}
    for name, values in (("category", flt.categories), ("severity", flt.severities)):
        if values is None:
            lists[name] = None
            continue
        if not values:
            raise ValueError(f"empty {name} list matches nothing")
        lists[name] = tuple(_checked(v) for v in dict.fromkeys(values))
    return TierFilter(namespace=_checked(flt.namespace),
                      since_ms=None if flt.since_ms is None else int(flt.since_ms),
                      until_ms=None if flt.until_ms is None else int(flt.until_ms),
                      categories=lists["category"], severities=lists["severity"])


def build_filter(flt: VectorFilter) -> str:
    """The zvec filter expression for a VectorFilter."""
    return tier_filter(flt).zvec()


def distance_to_similarity(distance: float) -> float:
    """zvec's COSINE score is a distance (0 = identical); the API speaks similarity."""
    return 1.0 - float(distance)


def fuse_tier_hits(per_tier: Mapping[str, Sequence[VectorHit]], topk: int) -> list[VectorHit]:
    """Merge the hits of several tiers: one hit per key (the best score; on a tie the hotter
    tier, since a memory briefly lives in two tiers while it is being promoted), best first."""
    order = {t: i for i, t in enumerate(TIERS)}
    best: dict[str, VectorHit] = {}
    for tier in sorted(per_tier, key=lambda t: order.get(t, 99)):
        for hit in per_tier[tier]:
            cur = best.get(hit.key)
            if cur is None or hit.score > cur.score + 1e-6:
                best[hit.key] = hit
    return sorted(best.values(), key=lambda h: (-h.score, -h.timestamp_ms, h.key))[:topk]
