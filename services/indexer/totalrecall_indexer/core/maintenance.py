"""Tier maintenance: aging (compaction hot→warm→cold, retention) and HNSW builds (the periodic
ones, and the repair of a tier whose last build was interrupted)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .store_types import MAX_BATCH

if TYPE_CHECKING:
    from ..adapters.zvec_tiers import ZvecTiers
from .gate import CollectionGate
from .search import TIERS
from .state import IndexState, now_ms

log = logging.getLogger("totalrecall.indexer")


async def build_hnsw(tiers: ZvecTiers, tier: str) -> None:
    """`tiers.optimize(tier)` in a thread; a cancelled caller still waits for the thread, so the
    optimize lock is not released (and the collection not closed) under a running build."""
    job = asyncio.ensure_future(asyncio.to_thread(tiers.optimize, tier))
    try:
        await asyncio.shield(job)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await job
        raise


class TierMaintenance:
    def __init__(self, state: IndexState, gate: CollectionGate) -> None:
        self.state = state
        self.gate = gate
        self.last_compaction: dict[str, Any] | None = None
        #: The tier whose HNSW is being built now, if any.
        self.building: str | None = None

    # --- aging -----------------------------------------------------------------------------
    async def compact(self, now: int | None = None) -> dict[str, int]:
        """Promote hot→warm (older than 24 h) and warm→cold (older than 90 d). Target first,
        then delete from the source: a memory is never missing (briefly it may be in both)."""
        st, cfg, tiers = self.state, self.state.cfg, self.state.tiers
        now = now_ms() if now is None else now
        moved: dict[str, int] = {}
        for src, dst, max_age in (("hot", "warm", cfg.hot_max_age_s),
                                  ("warm", "cold", cfg.warm_max_age_s)):
            if src in tiers.held or dst in tiers.held:
                continue  # at the next pass, once the interrupted build has completed
            cutoff = now - int(max_age * 1000)
            total = 0
            for _ in range(100_000):
                async with st.write_lock:
                    docs = await asyncio.to_thread(tiers.fetch_older, src, cutoff,
                                                   MAX_BATCH, st.pinned_ids)
                    if not docs:
                        break
                    await asyncio.to_thread(tiers.upsert, dst, docs)
                    keys = [d.key for d in docs]
                    await asyncio.to_thread(tiers.delete, src, keys)
                    st.new_since_optimize[dst] += len(docs)
                try:
                    await st.pg.set_tier(keys, dst)
                except Exception as exc:  # the tier column is informative; zvec is the truth
                    log.warning("could not record tier change in postgres: %s", exc)
                total += len(docs)
                st.metrics.compacted.labels(src=src, dst=dst).inc(len(docs))
                if len(docs) < MAX_BATCH:
                    break
            moved[f"{src}->{dst}"] = total
        if cfg.cold_max_age_s is not None and not tiers.held:
            moved["expired"] = await self.expire(now - int(cfg.cold_max_age_s * 1000))
        self.last_compaction = {"at": datetime.now(UTC).isoformat(), **moved}
        await st.refresh_metrics()
        return moved

    async def expire(self, cutoff_ms: int) -> int:
        """Retention: drop what is older than the cutoff from the indexes (Zvec, Postgres),
        except the curated MEMORY.md memories. The Markdown daily logs keep them: they are the
        ground truth (a rebuild re-indexes them and the next compaction drops them again)."""
        st = self.state
        cutoff = datetime.fromtimestamp(cutoff_ms / 1000, UTC)
        total = 0
        while keys := await st.pg.keys_older_than(cutoff, MAX_BATCH):
            async with st.write_lock:
                st.check_writable(TIERS)
                for tier in TIERS:  # Zvec first: a crash in between leaves Postgres to retry
                    await asyncio.to_thread(st.tiers.delete, tier, keys)
                await st.pg.delete(keys)
            total += len(keys)
            st.metrics.expired.inc(len(keys))
        if total:
            log.info("retention: dropped %d memories older than %s from the indexes", total, cutoff)
        return total

    # --- HNSW builds -----------------------------------------------------------------------
    def optimize_due(self, tier: str, completeness: float, doc_count: int,
                     mirrored: bool = False) -> bool:
        if completeness >= 1.0 or doc_count == 0:
            return False
        if tier != "hot":
            # A quantized tier's copy changes how it is searched, not when it is built: once
            # it outgrows exact search, as before it had a copy. Built ahead like hot, the
            # recall bench's warm tier (19k memories, int8) was built while it measured: the
            # indexer's CPU per recall went from 3.4-4.3 ms to 15-18 ms.
            mirrored = False
        linear_max = self.state.cfg.linear_max_docs
        if doc_count <= linear_max and not (mirrored and 2 * doc_count > linear_max):
            # Searched exactly (`Searcher`): a graph nobody reads yet costs a build, and during
            # a build a tier without an in-memory copy is searched without (`BuildExclusion`).
            # A copied tier past half the copy's size is built ahead, its searches going on
            # from the copy: it leaves the copy with its graph ready, rather than with every
            # doc to build at once, the tier unsearched and its writes held all that while.
            return False
        if tier != "hot":
            # zvec brute-forces the part of a tier not in the graph yet on the *quantized*
            # codes, without the refiner: int8 loses a little recall, int4 a lot (bench: 0.57
            # recall@10 for int4). Incremental builds are cheap (~0.2 s for 200 new docs on
            # 33k), so warm and cold are built at the next optimize tick.
            return True
        if self.state.new_since_optimize[tier] >= self.state.cfg.optimize_min_new_docs:
            return True
        return (time.monotonic() - self.state.last_optimize[tier]
                >= self.state.cfg.optimize_max_delay_s)

    def builds(self, stats: dict[str, dict[str, Any]]) -> dict[str, str]:
        """The HNSW builds not done yet, by tier: `running`, or `due` at the next optimize tick.
        Recall works meanwhile, at a cost: the build takes CPU, and a tier's part not in its
        graph yet is searched by brute force. Empty once every build a load called for is done
        (a bulk load's last build can end minutes after its last write)."""
        out: dict[str, str] = {}
        for tier, s in stats.items():
            if tier == self.building:
                out[tier] = "running"
            elif self.optimize_due(tier, float(s["index_completeness"]), int(s["doc_count"]),
                                   mirrored=self.state.tiers.has_mirror(tier)):
                out[tier] = "due"
        return out

    async def optimize_once(self, force: bool = False) -> dict[str, float]:
        """Build the HNSW of every tier that needs it (one at a time, in a thread)."""
        st = self.state
        done: dict[str, float] = {}
        if self.gate.optimize_lock.locked():
            return done
        async with self.gate.optimize_lock:
            stats = await asyncio.to_thread(st.tiers.stats)
            for tier, s in stats.items():
                due = (s["doc_count"] > 0 and s["index_completeness"] < 1.0) if force else \
                    self.optimize_due(tier, s["index_completeness"], int(s["doc_count"]),
                                      mirrored=st.tiers.has_mirror(tier))
                if not due:
                    continue
                st.new_since_optimize[tier] = 0
                t0 = time.perf_counter()
                log.info("building the HNSW of %s (%d docs, %.0f%% indexed)", tier,
                         s["doc_count"], 100 * s["index_completeness"])
                self.building = tier
                try:
                    await build_hnsw(st.tiers, tier)
                finally:
                    self.building = None
                took = time.perf_counter() - t0
                st.last_optimize[tier] = time.monotonic()
                st.metrics.optimize_seconds.labels(tier=tier).observe(took)
                done[tier] = round(took, 3)
            st.metrics.set_tier_stats(await asyncio.to_thread(st.tiers.stats))
        return done

    async def finish_held_builds(self) -> dict[str, float]:
        """Complete an HNSW build of every tier whose writes are held (its last build was
        interrupted by a crash, or a write failed): a completed build repairs zvec's write path
        (see `build_guard`) and lifts the hold. Reads keep working meanwhile."""
        st = self.state
        done: dict[str, float] = {}
        async with self.gate.optimize_lock:
            for tier in list(st.tiers.held):
                if tier not in st.tiers.cols:
                    continue
                t0 = time.perf_counter()
                log.warning("finishing the HNSW build of %s before it takes writes again (%s)",
                            tier, st.tiers.held.get(tier))
                await build_hnsw(st.tiers, tier)
                took = time.perf_counter() - t0
                st.new_since_optimize[tier] = 0
                st.last_optimize[tier] = time.monotonic()
                st.metrics.optimize_seconds.labels(tier=tier).observe(took)
                st.metrics.build_repairs.labels(tier=tier).inc()
                log.warning("HNSW build of %s completed in %.2fs: it takes writes again", tier,
                            took)
                done[tier] = round(took, 3)
                st.reindex_wanted.set()  # then check it against Postgres
        if done:
            await st.refresh_metrics()
        return done
