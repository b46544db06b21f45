"""The ingest writer: one batch of embedded events as a unit of work over the three stores.

Markdown daily log (fsync) → Postgres → Zvec, written concurrently; the batch counts as done
(and its messages are acked) only when all three succeeded. Every write is idempotent, so the
redelivery after a partial failure is safe.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from totalrecall_schema import EmbeddedEvent
from totalrecall_schema.daily_log import LogRecord

from .gate import CollectionGate
from .state import IndexState, StoreUnavailable, now_ms
from .store_types import PgRow, TierDoc, TierUnavailable

log = logging.getLogger("totalrecall.indexer")


@dataclass
class BatchResult:
    indexed: int = 0
    unembedded: int = 0
    markdown_written: int = 0
    markdown_skipped: int = 0
    by_tier: dict[str, int] = field(default_factory=dict)


def zdoc(ev: EmbeddedEvent) -> TierDoc:
    e = ev.event
    assert ev.vector is not None
    return TierDoc(key=e.key, vector=ev.vector, namespace=e.namespace, category=e.category,
                   subcategory=e.subcategory, severity=e.metadata.severity.value,
                   ts_ms=e.ts_ms, id=e.id, summary=e.summary)


def latest_per_key(events: Sequence[EmbeddedEvent]) -> list[EmbeddedEvent]:
    """Last one wins within a batch (same key twice: keep the highest repeat_count)."""
    uniq: dict[str, EmbeddedEvent] = {}
    for ev in events:
        cur = uniq.get(ev.event.key)
        if cur is None or ev.repeat_count >= cur.repeat_count:
            uniq[ev.event.key] = ev
    return list(uniq.values())


class IngestWriter:
    def __init__(self, state: IndexState, gate: CollectionGate) -> None:
        self.state = state
        self.gate = gate

    async def index_batch(self, events: Sequence[EmbeddedEvent],
                          write_markdown: bool = True, tier: str | None = None) -> BatchResult:
        """Markdown (fsync) → Postgres → Zvec. Raises StoreUnavailable when a store is down
        (nothing is acked then; every write is idempotent so the retry is safe). `tier` forces
        the tier (pinned memories) instead of the one the event's age gives."""
        async with self.state.write_lock:
            return await self.index_locked(events, write_markdown, tier)

    async def _vectors_accepted(self, batch: list[EmbeddedEvent]) -> dict[str, bool]:
        """Which vectors may go into Zvec (same model fingerprint and dim as the collections)?"""
        tiers = self.state.tiers
        vec_ok: dict[str, bool] = {}
        verdicts: dict[tuple[str | None, int], bool] = {}
        for ev in batch:
            if ev.vector is None:
                vec_ok[ev.event.key] = False
                continue
            sig = (ev.model, len(ev.vector))
            ok = verdicts.get(sig)
            if ok is None:
                if sig == (tiers.model, tiers.dim):
                    ok = True
                else:
                    if (tiers.model is None and sig[1] != tiers.dim
                            and await asyncio.to_thread(tiers.total_docs) == 0):
                        await self.gate.reset_tiers(sig[1], sig[0])  # first vectors fix the dim
                    ok = await asyncio.to_thread(tiers.accept, *sig)
                verdicts[sig] = ok
            if not ok:
                log.warning("event %s embedded with %s (dim %d) but the index holds %s (dim %d);"
                            " stored unembedded (run rebuild after a model change)",
                            ev.event.key, ev.model, len(ev.vector), tiers.model, tiers.dim)
            vec_ok[ev.event.key] = ok
        return vec_ok

    async def index_locked(self, events: Sequence[EmbeddedEvent], write_markdown: bool,
                           force_tier: str | None = None) -> BatchResult:
        """`index_batch` for a caller that already holds the write lock (rebuild)."""
        st, m = self.state, self.state.metrics
        res = BatchResult()
        if st.forgotten:
            kept = [ev for ev in events if ev.event.key not in st.forgotten]
            if len(kept) < len(events):
                m.events.labels(outcome="forgotten").inc(len(events) - len(kept))
            events = kept
        if not events:
            return res
        batch = latest_per_key(events)
        now = now_ms()
        vec_ok = await self._vectors_accepted(batch)

        rows, by_tier = self._plan(batch, vec_ok, force_tier, now)
        st.check_writable(by_tier)
        outcomes = await asyncio.gather(
            self._write_markdown_log(batch, res) if write_markdown else _nothing(),
            self._write_postgres(rows), self._write_zvec(by_tier, res), return_exceptions=True)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        for err in errors:  # a data error wins: retrying would not help
            if not isinstance(err, StoreUnavailable):
                raise err
        if errors:
            raise errors[0]

        self._observe_lag(batch)
        res.indexed = sum(1 for ok in vec_ok.values() if ok)
        res.unembedded = len(batch) - res.indexed
        m.events.labels(outcome="indexed").inc(res.indexed)
        if res.unembedded:
            m.events.labels(outcome="unembedded").inc(res.unembedded)
        return res

    def _plan(self, batch: list[EmbeddedEvent], vec_ok: dict[str, bool], force_tier: str | None,
              now: int) -> tuple[list[PgRow], dict[str, list[TierDoc]]]:
        """The batch's Postgres rows, and its Zvec docs by tier (the events whose vectors the
        index accepts)."""
        st = self.state
        rows: list[PgRow] = []
        by_tier: dict[str, list[TierDoc]] = {}
        for ev in batch:
            tier = force_tier or st.tier_for(ev.event.ts_ms, now)
            ok = vec_ok[ev.event.key]
            rec = LogRecord.from_embedded(ev)
            if not ok:
                rec.model = None if ev.vector is None else ev.model
            rows.append(PgRow(rec=rec, tier=tier, embedded=ok, part=st.part_of(ev.event)))
            if ok:
                by_tier.setdefault(tier, []).append(zdoc(ev))
        return rows, by_tier

    async def _write_markdown_log(self, batch: list[EmbeddedEvent], res: BatchResult) -> None:
        st, m = self.state, self.state.metrics
        t0 = time.perf_counter()
        try:
            ares = await asyncio.to_thread(
                st.markdown.append, [LogRecord.from_embedded(e) for e in batch])
        except OSError as exc:
            raise StoreUnavailable(f"markdown log: {exc}") from exc
        m.write_seconds.labels(store="markdown").observe(time.perf_counter() - t0)
        res.markdown_written, res.markdown_skipped = ares.written, ares.skipped

    async def _write_postgres(self, rows: list[PgRow]) -> None:
        st, m = self.state, self.state.metrics
        t0 = time.perf_counter()
        try:
            await st.pg.upsert(rows)
        except Exception as exc:
            if st.pg.is_data_error(exc):
                raise
            raise StoreUnavailable(f"postgres: {type(exc).__name__}: {exc}") from exc
        m.write_seconds.labels(store="postgres").observe(time.perf_counter() - t0)

    async def _write_zvec(self, by_tier: dict[str, list[TierDoc]], res: BatchResult) -> None:
        st, m = self.state, self.state.metrics
        t0 = time.perf_counter()
        for tier, docs in by_tier.items():
            try:
                await asyncio.to_thread(st.tiers.upsert, tier, docs)
            except OSError as exc:
                raise StoreUnavailable(f"zvec {tier}: {exc}") from exc
            except TierUnavailable as exc:
                # Never a data error: dead-lettering would ack a memory Zvec lacks.
                st.builds_wanted.set()
                raise StoreUnavailable(str(exc)) from exc
            st.new_since_optimize[tier] += len(docs)
            res.by_tier[tier] = len(docs)
        m.write_seconds.labels(store="zvec").observe(time.perf_counter() - t0)

    def _observe_lag(self, batch: list[EmbeddedEvent]) -> None:
        """Time from an event to its being searchable."""
        done_ms = now_ms()
        for ev in batch:
            # A folded repeat keeps its first occurrence's timestamp: measure from the last one.
            seen = ev.last_seen.timestamp() * 1000 if ev.last_seen else ev.event.ts_ms
            lag = (done_ms - max(seen, ev.event.ts_ms)) / 1000.0
            if lag >= 0:
                self.state.metrics.searchable_seconds.observe(lag)


async def _nothing() -> None:
    """An awaitable that does nothing (the Markdown log of a batch that is not appended)."""
