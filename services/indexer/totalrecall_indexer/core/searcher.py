"""Vector search over the tiers: gating (model, dimension, a rebuild in progress), one search
per tier in threads, and the fusion of their hits (`search.fuse_tier_hits`)."""

from __future__ import annotations

import asyncio
import time

from totalrecall_schema import VectorHit, VectorSearchReply, VectorSearchRequest

from .gate import CollectionGate
from .search import distance_to_similarity, fuse_tier_hits, tier_filter
from .state import IndexState
from .store_types import RawHit, TierBuilding


class Searcher:
    def __init__(self, state: IndexState, gate: CollectionGate) -> None:
        self.state = state
        self.gate = gate

    async def search(self, req: VectorSearchRequest) -> VectorSearchReply:
        if self.gate.resetting:
            return VectorSearchReply(error="index is being rebuilt; retry shortly")
        async with self.gate.searching():
            return await self._search(req)

    async def _search(self, req: VectorSearchRequest) -> VectorSearchReply:
        t_all = time.perf_counter()
        tiers, cfg = self.state.tiers, self.state.cfg
        if req.model and tiers.model and req.model != tiers.model:
            return VectorSearchReply(error=(
                f"model mismatch: query vector made with {req.model!r}, index holds "
                f"{tiers.model!r}"))
        if tiers.model is None and tiers.total_docs() == 0:
            return VectorSearchReply(took_ms={"total": 0.0})
        if len(req.vector) != tiers.dim:
            return VectorSearchReply(error=(
                f"dimension mismatch: query has {len(req.vector)}, index has {tiers.dim}"))
        try:
            flt = tier_filter(req.filter)
        except ValueError as exc:
            return VectorSearchReply(error=f"invalid filter: {exc}")
        ef = max(cfg.search_ef, req.topk * 2)

        def search_tier(tier: str) -> list[RawHit]:
            try:
                linear = tiers.doc_count(tier) <= cfg.linear_max_docs
                return tiers.search(tier, req.vector, req.topk, flt, ef, linear)
            except TierBuilding:  # built, or busy past the wait: without this tier
                self.state.metrics.search_skipped.labels(tier=tier).inc()
                return []

        async def one(tier: str) -> tuple[str, list[VectorHit], float]:
            t0 = time.perf_counter()
            raw = await asyncio.to_thread(search_tier, tier)
            took = time.perf_counter() - t0
            self.state.metrics.search_seconds.labels(tier=tier).observe(took)
            hits = [VectorHit(key=h.key, id=str(h.fields.get("id", "")),
                              score=distance_to_similarity(h.distance), tier=tier,  # type: ignore[arg-type]
                              timestamp_ms=int(h.fields.get("ts", 0)),
                              category=str(h.fields.get("category", "")),
                              summary=str(h.fields.get("summary", "")))
                    for h in raw]
            return tier, hits, took * 1000.0

        wanted = [t for t in dict.fromkeys(req.tiers) if t in tiers.cols]
        try:
            results = await asyncio.gather(*(one(t) for t in wanted))
        except (ValueError, RuntimeError) as exc:
            return VectorSearchReply(error=f"search failed: {exc}")
        took = {t: round(ms, 3) for t, _h, ms in results}
        hits = fuse_tier_hits({t: h for t, h, _ms in results}, req.topk)
        took["total"] = round((time.perf_counter() - t_all) * 1000.0, 3)
        return VectorSearchReply(hits=hits, took_ms=took)
