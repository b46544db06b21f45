"""The indexer's logic: write a batch to Markdown + Postgres + Zvec, search, admin verbs.

No NATS here: the handlers decode messages and ack; rebuild gets an `embed` callable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from totalrecall_schema import (
    AdminReply,
    AdminRequest,
    EmbeddedEvent,
    EmbedReply,
    EventMetadata,
    MemoryEvent,
    VectorHit,
    VectorSearchReply,
    VectorSearchRequest,
)
from totalrecall_schema.tiers import HOT_MAX_AGE_S, WARM_MAX_AGE_S

from ..metrics import Metrics
from .markdown import LogRecord, MarkdownLog
from .memory_md import SOURCE as MEMORY_MD_SOURCE
from .memory_md import Entry, parse_memory_md
from .pgstore import PgRow, PgStore
from .search import TIERS, build_filter, distance_to_similarity, fuse_tier_hits, tier_for_age
from .tiers import MAX_BATCH, TierUnavailable, ZDoc, ZvecTiers

log = logging.getLogger("totalrecall.indexer")

#: texts -> EmbedReply, or None when the embedder is unavailable.
EmbedFn = Callable[[list[str]], Awaitable[EmbedReply | None]]
#: Receives the progress of a long job (rebuild) as a JSON-able dict.
ProgressFn = Callable[[dict[str, Any]], Awaitable[None]]


class StoreUnavailable(Exception):
    """A store that should come back (Postgres down, disk full): retry the batch later."""


@dataclass
class BatchResult:
    indexed: int = 0
    unembedded: int = 0
    markdown_written: int = 0
    markdown_skipped: int = 0
    by_tier: dict[str, int] = field(default_factory=dict)


@dataclass
class IndexerConfig:
    hot_max_age_s: float = HOT_MAX_AGE_S
    warm_max_age_s: float = WARM_MAX_AGE_S
    #: Retention: memories older than this are forgotten everywhere (None: kept forever).
    cold_max_age_s: float | None = None
    search_ef: int = 128
    #: Tiers this small are searched exactly (a scan costs little, and a filter that keeps a
    #: fifth of a quantized tier is where HNSW loses most recall).
    linear_max_docs: int = 20_000
    optimize_min_new_docs: int = 2000
    optimize_max_delay_s: float = 900.0
    embed_batch: int = 64
    memory_md_namespace: str = "default"
    #: While MEMORY.md memories lack vectors (embedder down), try again this often.
    memory_md_retry_s: float = 60.0


def _is_data_error(exc: BaseException) -> bool:
    """A Postgres error caused by the data itself: retrying won't help. SQLSTATE classes 22
    (data exception), 23 (integrity) and 54 (program limit exceeded: a value too big for an
    index entry or a tsvector). The batch is then retried event by event and only the event
    that fails on its own is dead-lettered, so one such event never stalls ingest."""
    import asyncpg

    state = getattr(exc, "sqlstate", None) or ""
    return isinstance(exc, asyncpg.PostgresError) and state[:2] in ("22", "23", "54")


async def _build(tiers: ZvecTiers, tier: str) -> None:
    """`tiers.optimize(tier)` in a thread; a cancelled caller still waits for the thread, so the
    optimize lock is not released (and the collection not closed) under a running build."""
    job = asyncio.ensure_future(asyncio.to_thread(tiers.optimize, tier))
    try:
        await asyncio.shield(job)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await job
        raise


def _now_ms() -> int:
    return int(time.time() * 1000)


def _zdoc(ev: EmbeddedEvent) -> ZDoc:
    e = ev.event
    assert ev.vector is not None
    return ZDoc(key=e.key, vector=ev.vector, namespace=e.namespace, category=e.category,
                subcategory=e.subcategory, severity=e.metadata.severity.value, ts_ms=e.ts_ms,
                id=e.id, summary=e.summary)


class Indexer:
    def __init__(self, markdown: MarkdownLog, pg: PgStore, tiers: ZvecTiers,
                 metrics: Metrics | None = None, config: IndexerConfig | None = None) -> None:
        self.markdown = markdown
        self.pg = pg
        self.tiers = tiers
        self.metrics = metrics or Metrics()
        self.cfg = config or IndexerConfig()
        self.write_lock = asyncio.Lock()
        self._optimize_lock = asyncio.Lock()
        # Searches run in threads without the write lock; a collection reset (rebuild) must
        # wait until none is in flight and keep new ones out meanwhile.
        self._searches = 0
        self._no_searches = asyncio.Event()
        self._no_searches.set()
        self._resetting = False
        self._new_since_optimize: dict[str, int] = dict.fromkeys(TIERS, 0)
        self._last_optimize: dict[str, float] = dict.fromkeys(TIERS, time.monotonic())
        self.last_compaction: dict[str, Any] | None = None
        # MEMORY.md: its memories stay in the hot tier (compaction skips these event ids).
        self.pinned_ids: set[str] = set()
        #: Keys of forgotten memories (the `forgotten` table, loaded by `load_tombstones`):
        #: no write brings them back (a redelivered or replayed event, a backfill, MEMORY.md).
        self.forgotten: set[str] = set()
        self.memory_md: dict[str, Any] = {"entries": 0, "unembedded": 0, "synced_at": None}
        self._memory_md_sig: tuple[int, int] | None = None
        self._memory_md_retry_at: float | None = None
        self._memory_md_lock = asyncio.Lock()
        # Tiers being refilled after they could not be opened (see `reindex_tiers`).
        self.reindex_state: dict[str, dict[str, Any]] = {}
        self._generation = 0  # bumped whenever the collections are re-created
        # Long jobs (rebuild): the latest progress, and where to send it (NATS publish).
        self.progress: dict[str, Any] | None = None
        self.on_progress: ProgressFn | None = None
        self._progress_sent = 0.0
        #: Set when a tier's writes are held: the app's repair loop then runs
        #: `finish_held_builds` (an interrupted HNSW build must complete before writes).
        self.builds_wanted = asyncio.Event()
        #: Set when `tiers.reindex` may have gained a tier: the app's loop runs `reindex_tiers`.
        self.reindex_wanted = asyncio.Event()

    # --- ingest ----------------------------------------------------------------------------
    async def load_tombstones(self) -> None:
        """Read the forgotten keys from Postgres (at startup, after `pg.start`)."""
        self.forgotten = await self.pg.tombstones()

    def tier_for(self, ts_ms: int, now_ms: int) -> str:
        return tier_for_age(ts_ms, now_ms, self.cfg.hot_max_age_s, self.cfg.warm_max_age_s)

    async def index_batch(self, events: Sequence[EmbeddedEvent],
                          write_markdown: bool = True, tier: str | None = None) -> BatchResult:
        """Markdown (fsync) → Postgres → Zvec. Raises StoreUnavailable when a store is down
        (nothing is acked then; every write is idempotent so the retry is safe). `tier` forces
        the tier (pinned memories) instead of the one the event's age gives."""
        async with self.write_lock:
            return await self._index_batch(events, write_markdown, tier)

    async def _index_batch(self, events: Sequence[EmbeddedEvent],
                           write_markdown: bool, force_tier: str | None = None) -> BatchResult:
        res = BatchResult()
        if self.forgotten:
            kept = [ev for ev in events if ev.event.key not in self.forgotten]
            if len(kept) < len(events):
                self.metrics.events.labels(outcome="forgotten").inc(len(events) - len(kept))
            events = kept
        if not events:
            return res
        # Last one wins within a batch (same key twice: keep the highest repeat_count).
        uniq: dict[str, EmbeddedEvent] = {}
        for ev in events:
            cur = uniq.get(ev.event.key)
            if cur is None or ev.repeat_count >= cur.repeat_count:
                uniq[ev.event.key] = ev
        batch = list(uniq.values())
        now_ms = _now_ms()
        m = self.metrics

        # Which vectors may go into Zvec (same model fingerprint and dim as the collections)?
        vec_ok: dict[str, bool] = {}
        verdicts: dict[tuple[str | None, int], bool] = {}
        for ev in batch:
            if ev.vector is None:
                vec_ok[ev.event.key] = False
                continue
            sig = (ev.model, len(ev.vector))
            ok = verdicts.get(sig)
            if ok is None:
                if sig == (self.tiers.model, self.tiers.dim):
                    ok = True
                else:
                    if (self.tiers.model is None and sig[1] != self.tiers.dim
                            and await asyncio.to_thread(self.tiers.total_docs) == 0):
                        await self._reset_tiers(sig[1], sig[0])  # first vectors fix the dim
                    ok = await asyncio.to_thread(self.tiers.accept, *sig)
                verdicts[sig] = ok
            if not ok:
                log.warning("event %s embedded with %s (dim %d) but the index holds %s (dim %d);"
                            " stored unembedded (run rebuild after a model change)",
                            ev.event.key, ev.model, len(ev.vector), self.tiers.model,
                            self.tiers.dim)
            vec_ok[ev.event.key] = ok

        rows: list[PgRow] = []
        by_tier: dict[str, list[ZDoc]] = {}
        for ev in batch:
            tier = force_tier or self.tier_for(ev.event.ts_ms, now_ms)
            ok = vec_ok[ev.event.key]
            rec = LogRecord.from_embedded(ev)
            if not ok:
                rec.model = None if ev.vector is None else ev.model
            rows.append(PgRow(rec=rec, tier=tier, embedded=ok))
            if ok:
                by_tier.setdefault(tier, []).append(_zdoc(ev))

        self._check_writable(by_tier)

        # The three stores are written concurrently (Markdown and Zvec in threads); the batch
        # is acked only when all three succeeded, and every write is idempotent, so a retry
        # after a partial failure is safe.
        async def write_markdown_log() -> None:
            if not write_markdown:
                return
            t0 = time.perf_counter()
            try:
                ares = await asyncio.to_thread(
                    self.markdown.append, [LogRecord.from_embedded(e) for e in batch])
            except OSError as exc:
                raise StoreUnavailable(f"markdown log: {exc}") from exc
            m.write_seconds.labels(store="markdown").observe(time.perf_counter() - t0)
            res.markdown_written, res.markdown_skipped = ares.written, ares.skipped

        async def write_postgres() -> None:
            t0 = time.perf_counter()
            try:
                await self.pg.upsert(rows)
            except Exception as exc:
                if _is_data_error(exc):
                    raise
                raise StoreUnavailable(f"postgres: {type(exc).__name__}: {exc}") from exc
            m.write_seconds.labels(store="postgres").observe(time.perf_counter() - t0)

        async def write_zvec() -> None:
            t0 = time.perf_counter()
            for tier, docs in by_tier.items():
                try:
                    await asyncio.to_thread(self.tiers.upsert, tier, docs)
                except OSError as exc:
                    raise StoreUnavailable(f"zvec {tier}: {exc}") from exc
                except TierUnavailable as exc:
                    # Never a data error: dead-lettering would ack a memory Zvec lacks.
                    self.builds_wanted.set()
                    raise StoreUnavailable(str(exc)) from exc
                self._new_since_optimize[tier] += len(docs)
                res.by_tier[tier] = len(docs)
            m.write_seconds.labels(store="zvec").observe(time.perf_counter() - t0)

        outcomes = await asyncio.gather(write_markdown_log(), write_postgres(), write_zvec(),
                                        return_exceptions=True)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        for err in errors:  # a data error wins: retrying would not help
            if not isinstance(err, StoreUnavailable):
                raise err
        if errors:
            raise errors[0]

        done_ms = _now_ms()
        for ev in batch:
            # A folded repeat keeps its first occurrence's timestamp: measure from the last one.
            seen = ev.last_seen.timestamp() * 1000 if ev.last_seen else ev.event.ts_ms
            lag = (done_ms - max(seen, ev.event.ts_ms)) / 1000.0
            if lag >= 0:
                m.searchable_seconds.observe(lag)
        res.indexed = sum(1 for ok in vec_ok.values() if ok)
        res.unembedded = len(batch) - res.indexed
        m.events.labels(outcome="indexed").inc(res.indexed)
        if res.unembedded:
            m.events.labels(outcome="unembedded").inc(res.unembedded)
        return res

    def _check_writable(self, tiers: Sequence[str] | dict[str, Any]) -> None:
        """Raise StoreUnavailable (retry later) when one of `tiers` takes no writes yet."""
        held = {t: self.tiers.held[t] for t in tiers if t in self.tiers.held}
        if held:
            self.builds_wanted.set()
            raise StoreUnavailable("; ".join(f"zvec tier {t} takes no writes yet: {why}"
                                             for t, why in held.items()))

    # --- search ----------------------------------------------------------------------------
    async def search(self, req: VectorSearchRequest) -> VectorSearchReply:
        if self._resetting:
            return VectorSearchReply(error="index is being rebuilt; retry shortly")
        self._searches += 1
        self._no_searches.clear()
        try:
            return await self._search(req)
        finally:
            self._searches -= 1
            if self._searches == 0:
                self._no_searches.set()

    async def _reset_tiers(self, dim: int, model: str | None) -> None:
        """Re-create the collections once no search or HNSW build is using them."""
        self._resetting = True
        try:
            async with self._optimize_lock:
                await self._no_searches.wait()
                await asyncio.to_thread(self.tiers.reset, dim, model)
                self._generation += 1
                self.reindex_state.clear()
        finally:
            self._resetting = False

    async def close_stores(self, optimize_wait_s: float = 10.0) -> None:
        """Close Zvec (after any running HNSW build; zvec survives an unclean exit anyway)."""
        self._resetting = True
        try:
            await asyncio.wait_for(self._optimize_lock.acquire(), timeout=optimize_wait_s)
        except TimeoutError:
            log.warning("HNSW build still running at shutdown; leaving zvec to close at exit")
            return
        try:
            await self._no_searches.wait()
            await asyncio.to_thread(self.tiers.close)
        finally:
            self._optimize_lock.release()

    async def _search(self, req: VectorSearchRequest) -> VectorSearchReply:
        t_all = time.perf_counter()
        tiers = self.tiers
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
            flt = build_filter(req.filter)
        except ValueError as exc:
            return VectorSearchReply(error=f"invalid filter: {exc}")
        ef = max(self.cfg.search_ef, req.topk * 2)

        async def one(tier: str) -> tuple[str, list[VectorHit], float]:
            t0 = time.perf_counter()
            linear = tiers.doc_count(tier) <= self.cfg.linear_max_docs
            raw = await asyncio.to_thread(tiers.search, tier, req.vector, req.topk, flt, ef,
                                          linear)
            took = time.perf_counter() - t0
            self.metrics.search_seconds.labels(tier=tier).observe(took)
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

    # --- tiers: compaction and HNSW builds -------------------------------------------------
    async def compact(self, now_ms: int | None = None) -> dict[str, int]:
        """Promote hot→warm (older than 24 h) and warm→cold (older than 90 d). Target first,
        then delete from the source: a memory is never missing (briefly it may be in both)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        moved: dict[str, int] = {}
        for src, dst, max_age in (("hot", "warm", self.cfg.hot_max_age_s),
                                  ("warm", "cold", self.cfg.warm_max_age_s)):
            if src in self.tiers.held or dst in self.tiers.held:
                continue  # at the next pass, once the interrupted build has completed
            cutoff = now_ms - int(max_age * 1000)
            total = 0
            for _ in range(100_000):
                async with self.write_lock:
                    docs = await asyncio.to_thread(self.tiers.fetch_older, src, cutoff,
                                                   MAX_BATCH, self.pinned_ids)
                    if not docs:
                        break
                    await asyncio.to_thread(self.tiers.upsert, dst, docs)
                    keys = [d.key for d in docs]
                    await asyncio.to_thread(self.tiers.delete, src, keys)
                    self._new_since_optimize[dst] += len(docs)
                try:
                    await self.pg.set_tier(keys, dst)
                except Exception as exc:  # the tier column is informative; zvec is the truth
                    log.warning("could not record tier change in postgres: %s", exc)
                total += len(docs)
                self.metrics.compacted.labels(src=src, dst=dst).inc(len(docs))
                if len(docs) < MAX_BATCH:
                    break
            moved[f"{src}->{dst}"] = total
        if self.cfg.cold_max_age_s is not None and not self.tiers.held:
            moved["expired"] = await self.expire(now_ms - int(self.cfg.cold_max_age_s * 1000))
        self.last_compaction = {"at": datetime.now(UTC).isoformat(), **moved}
        await self.refresh_metrics()
        return moved

    def optimize_due(self, tier: str, completeness: float, doc_count: int) -> bool:
        if completeness >= 1.0 or doc_count == 0:
            return False
        if tier != "hot":
            # zvec brute-forces the part of a tier not in the graph yet on the *quantized*
            # codes, without the refiner: int8 loses a little recall, int4 a lot (bench: 0.57
            # recall@10 for int4). Incremental builds are cheap (~0.2 s for 200 new docs on
            # 33k), so warm and cold are built at the next optimize tick.
            return True
        if self._new_since_optimize[tier] >= self.cfg.optimize_min_new_docs:
            return True
        return time.monotonic() - self._last_optimize[tier] >= self.cfg.optimize_max_delay_s

    async def optimize_once(self, force: bool = False) -> dict[str, float]:
        """Build the HNSW of every tier that needs it (one at a time, in a thread)."""
        done: dict[str, float] = {}
        if self._optimize_lock.locked():
            return done
        async with self._optimize_lock:
            stats = await asyncio.to_thread(self.tiers.stats)
            for tier, st in stats.items():
                due = (st["doc_count"] > 0 and st["index_completeness"] < 1.0) if force else \
                    self.optimize_due(tier, st["index_completeness"], int(st["doc_count"]))
                if not due:
                    continue
                self._new_since_optimize[tier] = 0
                t0 = time.perf_counter()
                log.info("building the HNSW of %s (%d docs, %.0f%% indexed)", tier,
                         st["doc_count"], 100 * st["index_completeness"])
                await _build(self.tiers, tier)
                took = time.perf_counter() - t0
                self._last_optimize[tier] = time.monotonic()
                self.metrics.optimize_seconds.labels(tier=tier).observe(took)
                done[tier] = round(took, 3)
            self.metrics.set_tier_stats(await asyncio.to_thread(self.tiers.stats))
        return done

    async def finish_held_builds(self) -> dict[str, float]:
        """Complete an HNSW build of every tier whose writes are held (its last build was
        interrupted by a crash, or a write failed): a completed build repairs zvec's write path
        (see `build_guard`) and lifts the hold. Reads keep working meanwhile."""
        done: dict[str, float] = {}
        async with self._optimize_lock:
            for tier in list(self.tiers.held):
                if tier not in self.tiers.cols:
                    continue
                t0 = time.perf_counter()
                log.warning("finishing the HNSW build of %s before it takes writes again (%s)",
                            tier, self.tiers.held.get(tier))
                await _build(self.tiers, tier)
                took = time.perf_counter() - t0
                self._new_since_optimize[tier] = 0
                self._last_optimize[tier] = time.monotonic()
                self.metrics.optimize_seconds.labels(tier=tier).observe(took)
                self.metrics.build_repairs.labels(tier=tier).inc()
                log.warning("HNSW build of %s completed in %.2fs: it takes writes again", tier,
                            took)
                done[tier] = round(took, 3)
                self.reindex_wanted.set()  # then check it against Postgres
        if done:
            await self.refresh_metrics()
        return done

    async def refresh_metrics(self) -> None:
        self.metrics.set_tier_stats(await asyncio.to_thread(self.tiers.stats))
        with contextlib.suppress(Exception):
            self.metrics.pg_rows.set(await self.pg.count())

    # --- admin -----------------------------------------------------------------------------
    async def stats(self) -> dict[str, Any]:
        tiers = await asyncio.to_thread(self.tiers.stats)
        out: dict[str, Any] = {
            "tiers": tiers,
            "docs": {t: int(s["doc_count"]) for t, s in tiers.items()},
            "index_completeness": {t: s["index_completeness"] for t, s in tiers.items()},
            "model": self.tiers.model,
            "dim": self.tiers.dim,
            "markdown_days": len(await asyncio.to_thread(self.markdown.days)),
            "last_compaction": self.last_compaction,
            "memory_md": dict(self.memory_md),
            "rebuild": dict(self.progress) if self.progress else None,
            "reindex": {t: {"reason": why, **self.reindex_state.get(t, {})}
                        for t, why in self.tiers.reindex.items()},
            "writes_held": dict(self.tiers.held),
        }
        try:
            out["pg_count"] = await self.pg.count()
            out["pg_by_tier"] = await self.pg.counts_by_tier()
        except Exception as exc:
            out["pg_count"] = None
            out["pg_error"] = str(exc)
        self.metrics.set_tier_stats(tiers)
        if out["pg_count"] is not None:
            self.metrics.pg_rows.set(out["pg_count"])
        return out

    async def expire(self, cutoff_ms: int) -> int:
        """Retention: drop what is older than the cutoff from the indexes (Zvec, Postgres),
        except the curated MEMORY.md memories. The Markdown daily logs keep them: they are the
        ground truth (a rebuild re-indexes them and the next compaction drops them again)."""
        cutoff = datetime.fromtimestamp(cutoff_ms / 1000, UTC)
        total = 0
        while keys := await self.pg.keys_older_than(cutoff, MAX_BATCH):
            async with self.write_lock:
                self._check_writable(TIERS)
                for tier in TIERS:  # Zvec first: a crash in between leaves Postgres to retry
                    await asyncio.to_thread(self.tiers.delete, tier, keys)
                await self.pg.delete(keys)
            total += len(keys)
            self.metrics.expired.inc(len(keys))
        if total:
            log.info("retention: dropped %d memories older than %s from the indexes", total, cutoff)
        return total

    async def forget(self, keys: Sequence[str], namespace: str | None = None) -> dict[str, Any]:
        """Forget memories everywhere: Postgres, every Zvec tier, the Markdown daily logs (an
        audit line replaces them), and record a tombstone first so that no later write brings
        them back (see `forgotten`). With `namespace`, keys stored under another namespace are
        left alone; keys stored nowhere yet (still in the pipeline) are tombstoned too.
        Result: `forgotten` (how many were found and removed), `found` (their keys)."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return {"forgotten": 0, "found": []}
        async with self.write_lock:
            self._check_writable(TIERS)  # before Postgres: all stores or none
            owners = await self.pg.namespaces_of(keys)
            if namespace is not None:
                keys = [k for k in keys if owners.get(k, namespace) == namespace]
            if not keys:
                return {"forgotten": 0, "found": []}
            when = await self.pg.timestamps(keys)
            # The tombstone is durable before anything is deleted: a crash in between leaves a
            # memory that a retried forget removes, never one that comes back.
            await self.pg.add_tombstones(keys, namespace)
            self.forgotten.update(keys)
            deleted_pg = await self.pg.delete(keys)
            zvec_deleted = 0
            for tier in TIERS:
                zvec_deleted += await asyncio.to_thread(self.tiers.delete, tier, keys)
            reason = f"forget requested for {len(keys)} key(s)"
            known = [k for k in keys if k in when]
            md = await asyncio.to_thread(self.markdown.forget_keys, known,
                                         {ts.astimezone(UTC).date() for ts in when.values()},
                                         reason) if known else {}
        unknown = [k for k in keys if k not in when]
        if unknown:
            # Keys Postgres does not know may still have a record in some daily file (written
            # there while Postgres failed, before the forget): search every file, outside the
            # write lock (the tombstones already keep new records of them out), so a long
            # search does not stall ingest.
            for day, gone in (await asyncio.to_thread(self.markdown.forget_keys, unknown, None,
                                                      reason)).items():
                md[day] = md.get(day, []) + gone
        await self.refresh_metrics()
        found = set(deleted_pg).union(*md.values())
        return {"forgotten": len(found), "found": [k for k in keys if k in found],
                "postgres": len(deleted_pg), "zvec": zvec_deleted,
                "markdown": {day: len(gone) for day, gone in md.items()}}

    # --- progress of long jobs -------------------------------------------------------------
    async def report(self, job: str, phase: str, done: int = 0, total: int = 0, *,
                     started: float | None = None, finished: bool = False,
                     force: bool = False, **extra: Any) -> None:
        """Record (and publish, at most ~5 times a second) the progress of a long job."""
        started = started if started is not None else time.time()
        self.progress = {"job": job, "phase": phase, "done": done, "total": total,
                         "started_at": started, "elapsed_s": round(time.time() - started, 3),
                         "finished": finished, **extra}
        now = time.monotonic()
        if self.on_progress is None or not (force or finished or now - self._progress_sent > 0.2):
            return
        self._progress_sent = now
        try:
            await self.on_progress(dict(self.progress))
        except Exception as exc:  # progress is best effort
            log.debug("progress not published: %s", exc)

    @property
    def rebuilding(self) -> bool:
        return bool(self.progress and self.progress.get("job") == "rebuild"
                    and not self.progress.get("finished"))

    async def rebuild(self, embed: EmbedFn | None, chunk: int = 512,
                      optimize: bool = False) -> dict[str, Any]:
        """Re-create Zvec and Postgres from the Markdown daily logs (and MEMORY.md),
        re-embedding every memory through `embed` (≤ cfg.embed_batch texts per call). When the
        embedder is unavailable the memories are stored unembedded (keyword-searchable) instead.
        Progress goes to `report` (phases read → index → memory_md [→ optimize] → done)."""
        if self.rebuilding:
            raise RuntimeError("a rebuild is already running")
        t0 = time.perf_counter()
        started = time.time()
        await self.report("rebuild", "read", started=started, force=True)
        try:
            result = await self._rebuild(embed, chunk, optimize, started)
        except BaseException as exc:
            await self.report("rebuild", "failed", started=started, finished=True,
                              error=f"{type(exc).__name__}: {exc}")
            raise
        result["took_s"] = round(time.perf_counter() - t0, 3)
        await self.report("rebuild", "done", result["records"], result["records"],
                          started=started, finished=True, result=result)
        return result

    async def _rebuild(self, embed: EmbedFn | None, chunk: int, optimize: bool,
                       started: float) -> dict[str, Any]:
        async with self.write_lock:
            records = await asyncio.to_thread(lambda: list(self.markdown.iter_all()))
            # The daily logs' audit lines are the ground truth of what was forgotten too: a
            # Postgres that lost its tombstones gets them back (but for memories written again
            # after their forget, before tombstones existed: those are live records).
            live = {r.key for r in records}
            restored = await asyncio.to_thread(self.markdown.forgotten_keys) - live
            if restored - self.forgotten:
                await self.pg.add_tombstones(sorted(restored - self.forgotten), None)
                self.forgotten |= restored
            # A forgotten memory whose record a daily file still holds (its forget could not
            # find it there) is not indexed again.
            records = [r for r in records if r.key not in self.forgotten]
            total = len(records)
            await self.report("rebuild", "index", 0, total, started=started, force=True)
            embedder_ok = embed is not None
            model: str | None = None
            dim = self.tiers.dim

            async def embed_records(recs: list[LogRecord]) -> list[list[float] | None]:
                nonlocal embedder_ok, model, dim
                out: list[list[float] | None] = []
                step = max(1, self.cfg.embed_batch)
                for i in range(0, len(recs), step):
                    part = recs[i: i + step]
                    reply = None
                    if embedder_ok and embed is not None:
                        try:
                            reply = await embed([r.event.embedding_text() for r in part])
                        except Exception as exc:
                            log.warning("embedder failed during rebuild: %s", exc)
                            reply = None
                    ok = (reply is not None and reply.error is None and reply.vectors is not None
                          and len(reply.vectors) == len(part)
                          and (model is None or reply.model == model))
                    if not ok:
                        embedder_ok = False
                        out.extend([None] * len(part))
                        continue
                    assert reply is not None and reply.vectors is not None
                    if model is None:
                        model = reply.model
                        dim = reply.dim or len(reply.vectors[0])
                    out.extend(reply.vectors)
                return out

            first = records[:chunk]
            first_vecs = await embed_records(first) if first else []
            await self._reset_tiers(dim, model)
            self._new_since_optimize = dict.fromkeys(TIERS, 0)
            await self.pg.truncate()
            n_embedded = 0
            for start in range(0, total, chunk):
                recs = records[start: start + chunk]
                vecs = first_vecs if start == 0 else await embed_records(recs)
                events = []
                for rec, vec in zip(recs, vecs, strict=True):
                    events.append(EmbeddedEvent(
                        event=rec.event, vector=vec, model=model if vec is not None else None,
                        repeat_count=rec.repeat_count, last_seen=rec.last_seen))
                    n_embedded += vec is not None
                await self._index_batch(events, write_markdown=False)
                await self.report("rebuild", "index", start + len(recs), total, started=started,
                                  embedded=n_embedded)
        await self.report("rebuild", "memory_md", total, total, started=started, force=True)
        self._memory_md_sig = None
        memory_md = await self.sync_memory_md(embed, force=True)
        result: dict[str, Any] = {
            "records": total, "embedded": n_embedded, "unembedded": total - n_embedded,
            "model": model, "memory_md": memory_md}
        if optimize:
            await self.report("rebuild", "optimize", total, total, started=started, force=True)
            result["optimized"] = await self.optimize_once(force=True)
        await self.refresh_metrics()
        return result

    # --- re-index from Postgres: a quarantined tier, or one checked after a crash ------------
    async def reindex_tiers(self, embed: EmbedFn | None, chunk: int = 256) -> dict[str, int]:
        """Check every tier `tiers.reindex` lists against Postgres and re-index what Zvec
        lacks, re-embedding the text with the index's model: a tier quarantined at open (started
        empty: all of it), or one whose HNSW build was interrupted or whose write failed (zvec
        may have lost memories: usually none). Concurrent writes are fine: upserts are
        idempotent and each chunk is re-checked against Postgres under the write lock (a memory
        forgotten or promoted meanwhile is not resurrected). Raises StoreUnavailable while the
        embedder is unavailable or the tier's writes are held (call again later)."""
        done: dict[str, int] = {}
        for tier in list(self.tiers.reindex):
            generation = self._generation
            model = self.tiers.model
            after, n, checked = "", 0, 0
            sample: list[str] = []  # a few of the re-indexed keys, for the log
            started = time.time()
            self.reindex_state[tier] = {"done": 0, "checked": 0, "started_at": started}
            self._check_writable([tier])
            while True:
                rows = await self.pg.tier_page(tier, model, after, chunk)
                if not rows:
                    break
                after = rows[-1]["key"]
                checked += len(rows)
                present = await asyncio.to_thread(self.tiers.present, tier,
                                                  [r["key"] for r in rows])
                rows = [r for r in rows if r["key"] not in present]
                if not rows:
                    self.reindex_state[tier] = {"done": n, "checked": checked,
                                                "started_at": started}
                    continue
                events = [MemoryEvent.model_construct(
                    id=r["id"], namespace=r["namespace"], timestamp=r["ts"],
                    category=r["category"], subcategory=r["subcategory"],
                    summary=r["summary"], detail=r["detail"]) for r in rows]
                vectors, got_model = await _embed_all([e.embedding_text() for e in events],
                                                      embed, self.cfg.embed_batch)
                if rows and (vectors[0] is None or got_model != model):
                    why = ("the embedder is unavailable" if vectors[0] is None else
                           f"the embedder's model {got_model!r} is not the index's {model!r}:"
                           " run `totalrecall rebuild`")
                    self.reindex_state[tier]["error"] = why
                    raise StoreUnavailable(f"re-index of {tier}: {why}")
                async with self.write_lock:
                    if self._generation != generation:  # a rebuild replaced everything
                        return done
                    alive = await self.pg.keys_in_tier([r["key"] for r in rows], tier)
                    docs = [ZDoc(key=r["key"], vector=vec, namespace=r["namespace"],
                                 category=r["category"], subcategory=r["subcategory"],
                                 severity=r["severity"], ts_ms=int(r["ts"].timestamp() * 1000),
                                 id=r["id"], summary=r["summary"])
                            for r, vec in zip(rows, vectors, strict=True)
                            if r["key"] in alive and vec is not None]
                    try:
                        await asyncio.to_thread(self.tiers.upsert, tier, docs)
                    except TierUnavailable as exc:
                        self.builds_wanted.set()
                        raise StoreUnavailable(str(exc)) from exc
                    self._new_since_optimize[tier] += len(docs)
                n += len(docs)
                sample += [d.key for d in docs][: 5 - len(sample)]
                self.metrics.reindexed.labels(tier=tier).inc(len(docs))
                self.reindex_state[tier] = {"done": n, "checked": checked, "started_at": started}
            await asyncio.to_thread(self.tiers.reindexed, tier)
            self.reindex_state.pop(tier, None)
            log.warning("re-indexed tier %s from Postgres: %d of %d memories were missing%s",
                        tier, n, checked, f" (e.g. {', '.join(sample)})" if sample else "")
            done[tier] = n
        await self.refresh_metrics()
        return done

    # --- MEMORY.md -------------------------------------------------------------------------
    @property
    def memory_md_path(self) -> Any:
        return self.markdown.root / "MEMORY.md"

    def memory_md_due(self) -> bool:
        """Has MEMORY.md changed (mtime/size) since the last sync, or is a retry due?"""
        try:
            st = self.memory_md_path.stat()
            sig: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            sig = None
        if sig != self._memory_md_sig:
            return True
        return (self._memory_md_retry_at is not None
                and time.monotonic() >= self._memory_md_retry_at)

    async def sync_memory_md(self, embed: EmbedFn | None, force: bool = False
                             ) -> dict[str, Any] | None:
        """Index MEMORY.md: upsert new or changed entries (pinned to the hot tier, embedded via
        `embed`), remove the ones no longer in the file. None when nothing changed."""
        async with self._memory_md_lock:
            if not force and not self.memory_md_due():
                return None
            path = self.memory_md_path
            try:
                st = await asyncio.to_thread(path.stat)
                sig: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
                text = await asyncio.to_thread(path.read_text, "utf-8", "replace")
            except FileNotFoundError:
                sig, text = None, ""
            now = datetime.now(UTC)
            entries: list[tuple[Entry, MemoryEvent]] = []
            for e in parse_memory_md(text, self.cfg.memory_md_namespace):
                if e.key in self.forgotten:  # forgotten stays forgotten, even from MEMORY.md
                    continue
                try:
                    entries.append((e, _entry_event(e, now)))
                except ValueError as exc:  # e.g. metadata over the size limit
                    log.warning("MEMORY.md line %d skipped: %s", e.line, exc)
            existing = await self.pg.source_rows(MEMORY_MD_SOURCE)
            want = {e.key for e, _ev in entries}
            gone = [k for k in existing if k not in want]
            stale = [(e, ev) for e, ev in entries
                     if _memory_md_stale(ev, existing.get(e.key), self.tiers)]
            vectors, model = await _embed_all([ev.embedding_text() for _e, ev in stale], embed,
                                              self.cfg.embed_batch)
            events: list[EmbeddedEvent] = []
            for (e, ev), vec in zip(stale, vectors, strict=True):
                old = existing.get(e.key)
                if old is not None:  # keep when it was first indexed
                    ev = ev.model_copy(update={"timestamp": old["ts"]})
                events.append(EmbeddedEvent(event=ev, vector=vec,
                                            model=model if vec is not None else None))
            self.pinned_ids = {e.id for e, _ev in entries}
            unembedded = 0
            if events:
                res = await self.index_batch(events, write_markdown=False, tier="hot")
                unembedded = res.unembedded
            if gone:
                await self.remove_keys(gone)
            self._memory_md_sig = sig
            self._memory_md_retry_at = (time.monotonic() + self.cfg.memory_md_retry_s
                                        if unembedded else None)
            self.memory_md = {"entries": len(entries), "unembedded": unembedded,
                              "upserted": len(events), "removed": len(gone),
                              "synced_at": now.isoformat()}
            self.metrics.memory_md_entries.set(len(entries))
            if events or gone:
                log.info("MEMORY.md synced: %s", self.memory_md)
            return dict(self.memory_md)

    async def remove_keys(self, keys: Sequence[str]) -> dict[str, int]:
        """Delete memories from Postgres and every Zvec tier (not from the daily logs)."""
        keys = list(dict.fromkeys(keys))
        async with self.write_lock:
            self._check_writable(TIERS)  # before Postgres: all stores or none
            deleted = await self.pg.delete(keys)
            zvec_deleted = 0
            for tier in TIERS:
                zvec_deleted += await asyncio.to_thread(self.tiers.delete, tier, keys)
        return {"postgres": len(deleted), "zvec": zvec_deleted}

    async def admin(self, req: AdminRequest, embed: EmbedFn | None = None) -> AdminReply:
        try:
            if req.verb == "stats":
                return AdminReply(result=await self.stats())
            if req.verb == "compact":
                moved = await self.compact()
                optimized = await self.optimize_once()
                return AdminReply(result={"moved": moved, "optimized": optimized})
            if req.verb == "forget":
                if not req.keys:
                    return AdminReply(ok=False, error="forget needs keys")
                return AdminReply(result=await self.forget(req.keys, req.namespace))
            if req.verb == "rebuild":
                if self.rebuilding:
                    return AdminReply(ok=False, error="a rebuild is already running",
                                      result={"progress": self.progress})
                return AdminReply(result=await self.rebuild(embed))
        except StoreUnavailable as exc:
            return AdminReply(ok=False, error=str(exc))
        except Exception as exc:
            log.exception("admin %s failed", req.verb)
            return AdminReply(ok=False, error=f"{type(exc).__name__}: {exc}")
        return AdminReply(ok=False, error=f"unknown verb {req.verb!r}")


# --- MEMORY.md helpers -------------------------------------------------------------------------
def _entry_event(e: Entry, ts: datetime) -> MemoryEvent:
    tags = ["memory.md", *dict.fromkeys(t[:64] for t in e.section if t.strip())][:32]
    return MemoryEvent(
        id=e.id, timestamp=ts, namespace=e.namespace, category=e.category,
        subcategory=e.subcategory, actor="user", source=MEMORY_MD_SOURCE,
        summary=e.summary, detail=e.detail[:32_000],
        metadata=EventMetadata(tags=tags, section=" › ".join(e.section)))


def _memory_md_stale(ev: MemoryEvent, row: dict[str, Any] | None, tiers: ZvecTiers) -> bool:
    """Must this entry be (re)written: new, changed, or still without a vector of the index's
    model?"""
    if row is None or not row["embedded"]:
        return True
    if tiers.model is not None and row["model"] != tiers.model:
        return True
    return (row["category"], row["subcategory"], row["summary"], row["detail"],
            list(row["tags"] or [])) != (ev.category, ev.subcategory, ev.summary, ev.detail,
                                         ev.metadata.tags)


async def _embed_all(texts: list[str], embed: EmbedFn | None, batch: int
                     ) -> tuple[list[list[float] | None], str | None]:
    """Vectors for `texts` (None for all when the embedder is unavailable) and the model."""
    if not texts:
        return [], None
    if embed is None:
        return [None] * len(texts), None
    out: list[list[float] | None] = []
    model: str | None = None
    for i in range(0, len(texts), max(1, batch)):
        part = texts[i: i + max(1, batch)]
        try:
            reply = await embed(part)
        except Exception as exc:
            log.warning("embedder failed for MEMORY.md: %s", exc)
            reply = None
        if (reply is None or reply.error or reply.vectors is None
                or len(reply.vectors) != len(part) or (model and reply.model != model)):
            return [None] * len(texts), None
        model = reply.model
        out.extend(reply.vectors)
    return out, model
