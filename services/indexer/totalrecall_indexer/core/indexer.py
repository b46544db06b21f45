"""The indexer: the facade the app and handlers call. It composes the rooms, each of which does
one thing over the shared `IndexState`:

- `ingest.IngestWriter`: a batch as one unit of work over Markdown, Postgres and Zvec;
- `searcher.Searcher`: vector search over the tiers (`gate.CollectionGate` keeps searches, HNSW
  builds and the re-creation of the collections apart);
- `maintenance.TierMaintenance`: compaction, retention, HNSW builds and their repair;
- `reindex.TierReindex`: refilling a tier from Postgres;
- `reconcile.Reconciler`: checking Zvec against Postgres (missing memories, duplicates);
- `rebuild.Rebuild`: re-creating Zvec and Postgres from the daily logs;
- `memory_md_sync.MemoryMdSync`: MEMORY.md, pinned to the hot tier;
- `forget.Forgetting`, `admin.Admin`: forget (with tombstones), and the admin verbs.

No NATS here: the handlers decode messages and ack; rebuild and re-index get an `embed` callable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from totalrecall_schema import AdminReply, AdminRequest, EmbeddedEvent, VectorSearchReply, VectorSearchRequest

from ..metrics import Metrics
from .admin import Admin
from .embed import EmbedFn
from .forget import Forgetting
from .gate import CollectionGate
from .ingest import BatchResult, IngestWriter
from .maintenance import TierMaintenance
from .memory_md_sync import MemoryMdSync
from .rebuild import ProgressFn, Rebuild
from .reconcile import Reconciler
from .reindex import TierReindex
from .searcher import Searcher
from .state import IndexerConfig, IndexState, StoreUnavailable

if TYPE_CHECKING:
    from ..adapters.markdown_log import MarkdownLog
    from ..adapters.pgstore import PgStore
    from ..adapters.zvec_tiers import ZvecTiers

__all__ = ["BatchResult", "EmbedFn", "Indexer", "IndexerConfig", "ProgressFn",
           "StoreUnavailable"]


class Indexer:
    def __init__(self, markdown: MarkdownLog, pg: PgStore, tiers: ZvecTiers,
                 metrics: Metrics | None = None, config: IndexerConfig | None = None) -> None:
        self.state = state = IndexState(markdown, pg, tiers, metrics or Metrics(),
                                        config or IndexerConfig())
        self.gate = CollectionGate(state)
        self.writer = IngestWriter(state, self.gate)
        self.searcher = Searcher(state, self.gate)
        self.maintenance = TierMaintenance(state, self.gate)
        self.reindexer = TierReindex(state)
        self.reconciler = Reconciler(state, self.gate)
        self.forgetting = Forgetting(state)
        self.memory_md_sync = MemoryMdSync(state, self.writer, self.forgetting)
        self.rebuilder = Rebuild(state, self.gate, self.writer, self.memory_md_sync,
                                 self.maintenance)
        self.admin_verbs = Admin(state, self.maintenance, self.forgetting, self.rebuilder,
                                 self.memory_md_sync)
        # The stores and the shared state, as attributes (the app's loops use them).
        self.markdown, self.pg, self.tiers = markdown, pg, tiers
        self.metrics, self.cfg = state.metrics, state.cfg
        self.write_lock: asyncio.Lock = state.write_lock
        self.builds_wanted: asyncio.Event = state.builds_wanted
        self.reindex_wanted: asyncio.Event = state.reindex_wanted
        self.reindex_state: dict[str, dict[str, Any]] = state.reindex_state

    # --- shared state ----------------------------------------------------------------------
    @property
    def forgotten(self) -> set[str]:
        return self.state.forgotten

    @forgotten.setter
    def forgotten(self, keys: set[str]) -> None:
        self.state.forgotten = keys

    @property
    def pinned_ids(self) -> set[str]:
        return self.state.pinned_ids

    @pinned_ids.setter
    def pinned_ids(self, ids: set[str]) -> None:
        self.state.pinned_ids = ids

    @property
    def _optimize_lock(self) -> asyncio.Lock:
        return self.gate.optimize_lock

    @property
    def _new_since_optimize(self) -> dict[str, int]:
        return self.state.new_since_optimize

    @property
    def _last_optimize(self) -> dict[str, float]:
        return self.state.last_optimize

    @property
    def last_compaction(self) -> dict[str, Any] | None:
        return self.maintenance.last_compaction

    @property
    def memory_md(self) -> dict[str, Any]:
        return self.memory_md_sync.status

    @property
    def memory_md_path(self) -> Path:
        return self.memory_md_sync.path

    @property
    def progress(self) -> dict[str, Any] | None:
        return self.rebuilder.progress

    @property
    def on_progress(self) -> ProgressFn | None:
        return self.rebuilder.on_progress

    @on_progress.setter
    def on_progress(self, fn: ProgressFn | None) -> None:
        self.rebuilder.on_progress = fn

    @property
    def rebuilding(self) -> bool:
        return self.rebuilder.running

    # --- ingest and search -----------------------------------------------------------------
    async def load_tombstones(self) -> None:
        await self.forgetting.load_tombstones()

    def tier_for(self, ts_ms: int, now_ms: int) -> str:
        return self.state.tier_for(ts_ms, now_ms)

    async def index_batch(self, events: Sequence[EmbeddedEvent],
                          write_markdown: bool = True, tier: str | None = None) -> BatchResult:
        return await self.writer.index_batch(events, write_markdown, tier)

    async def search(self, req: VectorSearchRequest) -> VectorSearchReply:
        return await self.searcher.search(req)

    async def close_stores(self, optimize_wait_s: float = 10.0) -> None:
        await self.gate.close_stores(optimize_wait_s)

    # --- tiers -----------------------------------------------------------------------------
    async def compact(self, now_ms: int | None = None) -> dict[str, int]:
        return await self.maintenance.compact(now_ms)

    async def expire(self, cutoff_ms: int) -> int:
        return await self.maintenance.expire(cutoff_ms)

    def optimize_due(self, tier: str, completeness: float, doc_count: int,
                     mirrored: bool = False) -> bool:
        return self.maintenance.optimize_due(tier, completeness, doc_count, mirrored)

    async def optimize_once(self, force: bool = False) -> dict[str, float]:
        return await self.maintenance.optimize_once(force)

    async def finish_held_builds(self) -> dict[str, float]:
        return await self.maintenance.finish_held_builds()

    async def reindex_tiers(self, embed: EmbedFn | None, chunk: int = 256) -> dict[str, int]:
        return await self.reindexer.reindex_tiers(embed, chunk)

    async def reconcile(self) -> dict[str, Any]:
        return await self.reconciler.check()

    @property
    def not_ready(self) -> dict[str, str]:
        """What keeps Zvec from being whole (empty: nothing): tiers whose writes are held or
        that are being re-indexed, and the consistency check while none has run to its end
        since start."""
        tiers = self.tiers
        out = {t: f"writes held: {why}" for t, why in tiers.held.items()}
        out.update({t: f"re-index: {why}" for t, why in tiers.reindex.items() if t not in out})
        if not self.reconciler.done_once:
            last = self.reconciler.last
            out["consistency"] = ("the check of Zvec against Postgres has not run yet"
                                  if last is None else f"not checked yet: {last.get('why')}")
        return out

    async def refresh_metrics(self) -> None:
        await self.state.refresh_metrics()

    # --- rebuild, MEMORY.md, forget, admin -------------------------------------------------
    async def report(self, job: str, phase: str, done: int = 0, total: int = 0, *,
                     started: float | None = None, finished: bool = False,
                     force: bool = False, **extra: Any) -> None:
        await self.rebuilder.report(job, phase, done, total, started=started,
                                    finished=finished, force=force, **extra)

    async def rebuild(self, embed: EmbedFn | None, chunk: int = 512,
                      optimize: bool = False) -> dict[str, Any]:
        return await self.rebuilder.rebuild(embed, chunk, optimize)

    def memory_md_due(self) -> bool:
        return self.memory_md_sync.due()

    async def sync_memory_md(self, embed: EmbedFn | None, force: bool = False
                             ) -> dict[str, Any] | None:
        return await self.memory_md_sync.sync(embed, force)

    async def remove_keys(self, keys: Sequence[str]) -> dict[str, int]:
        return await self.forgetting.remove_keys(keys)

    async def forget(self, keys: Sequence[str], namespace: str | None = None) -> dict[str, Any]:
        return await self.forgetting.forget(keys, namespace)

    async def stats(self) -> dict[str, Any]:
        return await self.admin_verbs.stats()

    async def admin(self, req: AdminRequest, embed: EmbedFn | None = None) -> AdminReply:
        return await self.admin_verbs.admin(req, embed)
