"""The tier policy: which Zvec tier holds a memory of a given age.

The indexer moves memories between tiers by it and recall-api picks the tiers to search by it,
so both must read the same ages: one policy, one pair of environment settings
(`TR_INDEXER_HOT_MAX_AGE_S`, `TR_INDEXER_WARM_MAX_AGE_S`, the indexer's documented names),
honoured by every service that reads `TierPolicy.from_env()`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .rpc import Tier

TIERS: tuple[Tier, ...] = ("hot", "warm", "cold")
HOT_MAX_AGE_S = 24 * 3600.0
WARM_MAX_AGE_S = 90 * 24 * 3600.0
HOT_MAX_AGE_ENV = "TR_INDEXER_HOT_MAX_AGE_S"
WARM_MAX_AGE_ENV = "TR_INDEXER_WARM_MAX_AGE_S"


@dataclass(frozen=True)
class TierPolicy:
    """hot < `hot_max_age_s` ≤ warm < `warm_max_age_s` ≤ cold (ages in seconds)."""

    hot_max_age_s: float = HOT_MAX_AGE_S
    warm_max_age_s: float = WARM_MAX_AGE_S

    def __post_init__(self) -> None:
        if not 0 < self.hot_max_age_s <= self.warm_max_age_s:
            raise ValueError(f"tier ages must be 0 < hot ({self.hot_max_age_s}) "
                             f"<= warm ({self.warm_max_age_s})")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TierPolicy:
        env = os.environ if env is None else env
        return cls(float(env.get(HOT_MAX_AGE_ENV, HOT_MAX_AGE_S)),
                   float(env.get(WARM_MAX_AGE_ENV, WARM_MAX_AGE_S)))

    def tier_for_age(self, age_s: float) -> Tier:
        """Where a memory of this age belongs."""
        if age_s < self.hot_max_age_s:
            return "hot"
        if age_s < self.warm_max_age_s:
            return "warm"
        return "cold"

    def tiers_reaching(self, age_s: float) -> tuple[Tier, ...]:
        """The tiers that hold memories from `age_s` ago up to now (a memory leaves the hot
        tier only once it is older than `hot_max_age_s`: that age itself is still hot)."""
        if age_s <= self.hot_max_age_s:
            return TIERS[:1]
        if age_s <= self.warm_max_age_s:
            return TIERS[:2]
        return TIERS
