"""Rebuild: re-create Zvec and Postgres from the Markdown daily logs (the ground truth) and
MEMORY.md, re-embedding every memory, with its progress published as it goes.

This is the job itself; `lifecycle/offline_rebuild.py` runs it with the service stopped (the
CLI), the `rebuild` admin verb inside the running service.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from totalrecall_schema import EmbeddedEvent
from totalrecall_schema.daily_log import LogRecord

from .embed import EmbedFn
from .gate import CollectionGate
from .ingest import IngestWriter
from .maintenance import TierMaintenance
from .memory_md_sync import MemoryMdSync
from .search import TIERS
from .state import IndexState

log = logging.getLogger("totalrecall.indexer")

#: Receives the progress of a long job (rebuild) as a JSON-able dict.
ProgressFn = Callable[[dict[str, Any]], Awaitable[None]]


class RecordEmbedder:
    """Vectors for daily-log records, chunk after chunk: the first reply fixes the model (and
    dimension); once the embedder fails, the remaining records go unembedded."""

    def __init__(self, embed: EmbedFn | None, batch: int, dim: int) -> None:
        self.embed = embed
        self.ok = embed is not None
        self.batch = max(1, batch)
        self.model: str | None = None
        self.dim = dim

    async def __call__(self, recs: list[LogRecord]) -> list[list[float] | None]:
        out: list[list[float] | None] = []
        for i in range(0, len(recs), self.batch):
            part = recs[i: i + self.batch]
            reply = None
            if self.ok and self.embed is not None:
                try:
                    reply = await self.embed([r.event.embedding_text() for r in part])
                except Exception as exc:
                    log.warning("embedder failed during rebuild: %s", exc)
                    reply = None
            ok = (reply is not None and reply.error is None and reply.vectors is not None
                  and len(reply.vectors) == len(part)
                  and (self.model is None or reply.model == self.model))
            if not ok:
                self.ok = False
                out.extend([None] * len(part))
                continue
            assert reply is not None and reply.vectors is not None
            if self.model is None:
                self.model = reply.model
                self.dim = reply.dim or len(reply.vectors[0])
            out.extend(reply.vectors)
        return out


class Rebuild:
    def __init__(self, state: IndexState, gate: CollectionGate, writer: IngestWriter,
                 memory_md: MemoryMdSync, maintenance: TierMaintenance) -> None:
        self.state = state
        self.gate = gate
        self.writer = writer
        self.memory_md = memory_md
        self.maintenance = maintenance
        #: The latest progress of a long job, and where to send it (NATS publish).
        self.progress: dict[str, Any] | None = None
        self.on_progress: ProgressFn | None = None
        self._progress_sent = 0.0

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
    def running(self) -> bool:
        return bool(self.progress and self.progress.get("job") == "rebuild"
                    and not self.progress.get("finished"))

    async def rebuild(self, embed: EmbedFn | None, chunk: int = 512,
                      optimize: bool = False) -> dict[str, Any]:
        """Re-create Zvec and Postgres from the Markdown daily logs (and MEMORY.md),
        re-embedding every memory through `embed` (≤ cfg.embed_batch texts per call). When the
        embedder is unavailable the memories are stored unembedded (keyword-searchable) instead.
        Progress goes to `report` (phases read → index → memory_md [→ optimize] → done)."""
        if self.running:
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

    async def _live_records(self) -> list[LogRecord]:
        """The daily logs' records that were not forgotten (under the write lock)."""
        st = self.state
        records = await asyncio.to_thread(lambda: list(st.markdown.iter_all()))
        # The daily logs' audit lines are the ground truth of what was forgotten too: a
        # Postgres that lost its tombstones gets them back (but for memories written again
        # after their forget, before tombstones existed: those are live records).
        live = {r.key for r in records}
        restored = await asyncio.to_thread(st.markdown.forgotten_keys) - live
        if restored - st.forgotten:
            await st.pg.add_tombstones(sorted(restored - st.forgotten), None)
            st.forgotten |= restored
        # A forgotten memory whose record a daily file still holds (its forget could not
        # find it there) is not indexed again.
        return [r for r in records if r.key not in st.forgotten]

    async def _rebuild(self, embed: EmbedFn | None, chunk: int, optimize: bool,
                       started: float) -> dict[str, Any]:
        st = self.state
        async with st.write_lock:
            records = await self._live_records()
            total = len(records)
            await self.report("rebuild", "index", 0, total, started=started, force=True)
            embed_records = RecordEmbedder(embed, st.cfg.embed_batch, st.tiers.dim)
            first = records[:chunk]
            first_vecs = await embed_records(first) if first else []
            await self.gate.reset_tiers(embed_records.dim, embed_records.model)
            st.new_since_optimize = dict.fromkeys(TIERS, 0)
            await st.pg.truncate()
            n_embedded = 0
            for start in range(0, total, chunk):
                recs = records[start: start + chunk]
                vecs = first_vecs if start == 0 else await embed_records(recs)
                events = []
                for rec, vec in zip(recs, vecs, strict=True):
                    events.append(EmbeddedEvent(
                        event=rec.event, vector=vec,
                        model=embed_records.model if vec is not None else None,
                        repeat_count=rec.repeat_count, last_seen=rec.last_seen))
                    n_embedded += vec is not None
                await self.writer.index_locked(events, write_markdown=False)
                await self.report("rebuild", "index", start + len(recs), total, started=started,
                                  embedded=n_embedded)
        await self.report("rebuild", "memory_md", total, total, started=started, force=True)
        self.memory_md.synced_sig = None
        memory_md = await self.memory_md.sync(embed, force=True)
        result: dict[str, Any] = {
            "records": total, "embedded": n_embedded, "unembedded": total - n_embedded,
            "model": embed_records.model, "memory_md": memory_md}
        if optimize:
            await self.report("rebuild", "optimize", total, total, started=started, force=True)
            result["optimized"] = await self.maintenance.optimize_once(force=True)
        await st.refresh_metrics()
        return result
