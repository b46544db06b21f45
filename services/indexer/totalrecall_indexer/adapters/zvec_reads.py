"""The Zvec tiers' reads: ANN and exact searches, fetches, listings, counts and stats. A read
waits for its tier's writes (a build: not at all) or goes without the tier (`BuildExclusion`)."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable
from typing import Any

from zvec import HnswQueryParam, Query

from ..core.search import TIERS, TierFilter
from ..core.store_types import MAX_BATCH, RawHit, TierBuilding
from .zvec_schema import OUTPUT_FIELDS, VECTOR, ZDoc, from_doc
from .zvec_tier_state import TierState

MAX_EF = 2048
#: The most documents one zvec query returns ("topk exceeds the maximum allowed value").
LIST_PAGE = 100_000
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@/+=-]{1,200}$")  # event ids: no quotes


class TierReads(TierState):
    def doc_count(self, tier: str, max_age_s: float = 1.0) -> int:
        """The tier's document count, at most `max_age_s` old (search asks on every query)."""
        now = time.monotonic()
        cached = self._counts.get(tier)
        if cached is not None and now - cached[0] < max_age_s:
            return cached[1]
        with self._access.reading(tier, self.search_wait_s) as admitted:
            if not admitted:
                if cached is not None:
                    return cached[1]
                raise self._busy(tier)
            n = int(self.cols[tier].stats.doc_count)
        self._counts[tier] = (now, n)
        return n

    def search(self, tier: str, vector: list[float], topk: int,
               filter: str | TierFilter | None, ef: int = 128,
               linear: bool = False) -> list[RawHit]:
        """ANN search (HNSW; quantized tiers refined with their full vectors), or an exact scan
        with `linear` (from the tier's mirror when it has one and the filter is not a string)."""
        if linear and not isinstance(filter, str):
            with self._mirror_locks[tier]:
                mirror = self._mirrors.get(tier)
                if mirror is not None:
                    return mirror.search(vector, topk, filter)
        with self._access.reading(tier, self.search_wait_s) as admitted:
            if not admitted:
                raise self._busy(tier)
            # Only zvec's own search needs its query parameters and the filter as a string.
            param = HnswQueryParam(ef=max(min(ef, MAX_EF), topk), is_linear=linear,
                                   is_using_refiner=tier != "hot")
            zfilter = (filter.zvec() or None) if isinstance(filter, TierFilter) else filter
            with self.watchdog.call("query"):
                res = self.cols[tier].query(Query(VECTOR, vector=vector, param=param),
                                            topk=topk, filter=zfilter, output_fields=OUTPUT_FIELDS)
        return [RawHit(key=d.id, distance=float(d.score), fields=dict(d.fields or {}))
                for d in res]

    def _busy(self, tier: str) -> TierBuilding:
        why = ("its HNSW build is running" if self._access.building_now(tier)
               else f"busy for over {self.search_wait_s} s")
        return TierBuilding(f"zvec tier {tier}: {why}")

    def fetch(self, tier: str, keys: list[str]) -> dict[str, ZDoc]:
        with self._access.reading(tier):
            docs = self.cols[tier].fetch(keys, include_vector=True)
        return {k: from_doc(d) for k, d in docs.items()}

    def fetch_older(self, tier: str, cutoff_ms: int, limit: int = MAX_BATCH,
                    exclude_ids: Iterable[str] = ()) -> list[ZDoc]:
        """Up to `limit` docs of `tier` with ts < cutoff_ms, with their vectors; docs whose
        event id is in `exclude_ids` (pinned memories) are left out."""
        flt = f"ts < {int(cutoff_ms)}"
        excluded = sorted({i for i in exclude_ids if _SAFE_ID.match(i)})
        if excluded:
            flt += " and id NOT IN (" + ", ".join(f"'{i}'" for i in excluded) + ")"
        with self._access.reading(tier), self.watchdog.call("query"):
            res = self.cols[tier].query(filter=flt, topk=limit, include_vector=True)
        return [from_doc(d) for d in res]

    def present(self, tier: str, keys: list[str]) -> set[str]:
        """Which of `keys` can be fetched, vector included, from `tier` or another tier
        (compaction may have moved a memory before Postgres learnt its new tier)."""
        found: set[str] = set()
        for name in [tier, *(t for t in TIERS if t != tier)]:
            rest = [k for k in keys if k not in found]
            if not rest or name not in self.cols:
                continue
            with self._access.reading(name):
                for i in range(0, len(rest), MAX_BATCH):
                    found |= set(self.cols[name].fetch(rest[i: i + MAX_BATCH],
                                                       include_vector=True))
        return found

    def count(self, tier: str) -> int:
        """The tier's document count now (waits for its reads and writes in flight)."""
        with self._access.reading(tier), self.watchdog.call("query"):
            return int(self.cols[tier].stats.doc_count)

    def keys(self, tier: str) -> list[str]:
        """Every key the tier holds. zvec lists a collection by a query without a vector, of at
        most `LIST_PAGE` documents: a larger tier is listed by halves of its time range."""
        col = self.cols[tier]
        with self._access.reading(tier):
            with self.watchdog.call("query"):
                count = int(col.stats.doc_count)
            if count <= LIST_PAGE:
                return self._list(col, None, count)
            return self._list_between(col, -(2**62), 2**62)

    def _list(self, col: Any, flt: str | None, topk: int) -> list[str]:
        if topk <= 0:
            return []
        with self.watchdog.call("query"):
            return [d.id for d in col.query(filter=flt, topk=topk, output_fields=[])]

    def _list_between(self, col: Any, lo: int, hi: int) -> list[str]:
        found = self._list(col, f"ts >= {lo} and ts < {hi}", LIST_PAGE)
        if len(found) < LIST_PAGE or hi - lo <= 1:
            return found
        mid = (lo + hi) // 2
        return self._list_between(col, lo, mid) + self._list_between(col, mid, hi)

    def stats(self) -> dict[str, dict[str, float]]:
        """Per tier; a tier being built or written answers with its last stats (a build of a
        large tier takes minutes, and the health check asks)."""
        out: dict[str, dict[str, float]] = {}
        for tier, col in self.cols.items():
            with self._access.reading(tier, self.search_wait_s) as admitted:
                if admitted:
                    st = col.stats
                    self._last_stats[tier] = {
                        "doc_count": int(st.doc_count),
                        "index_completeness": float(st.index_completeness.get(VECTOR, 1.0))}
            out[tier] = dict(self._last_stats.get(tier)
                             or {"doc_count": 0, "index_completeness": 1.0})
        return out

    def disk_bytes(self) -> dict[str, int]:
        out = {}
        for tier in TIERS:
            total = 0
            for dirpath, _dirs, files in os.walk(self.root / tier):
                for f in files:
                    with contextlib.suppress(OSError):
                        total += os.path.getsize(os.path.join(dirpath, f))
            out[tier] = total
        return out
