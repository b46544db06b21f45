"""One bootstrap: the ports wired together, shared by every request."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from totalrecall_schema import AdminRequest

from .adapters import statedisk
from .adapters.citations import Citations
from .alerts.monitor import AlertMonitor
from .metrics import Metrics
from .ports import Embedder, Publisher, Store, VectorIndex
from .recall.admission import Admission
from .recall.query_map import MappedQueries, QueryMap
from .recall.query_vectors import QueryVectors
from .recall.service import RecallService
from .sessions.conclusion_extractor import ConclusionExtractor
from .sessions.continuity_service import SessionContinuity
from .sessions.learning import PatternLearner
from .sessions.ledger import Ledger
from .settings import Settings


@dataclass
class Container:
    settings: Settings
    metrics: Metrics
    publisher: Publisher
    store: Store
    embedder: Embedder
    index: VectorIndex
    #: The proactive alerts (None: off, or no Postgres to read them from).
    alerts: AlertMonitor | None = None
    #: What embeds a recall's question (`adapters/query_model.py`; None: `embedder`, the RPC,
    #: which /health keeps checking: ingest needs it).
    query_embedder: Embedder | None = None
    #: The map of a question's vector before its search (`recall/query_map.py`; None: none).
    query_map: QueryMap | None = None

    def __post_init__(self) -> None:
        asks: Embedder = self.query_embedder or self.embedder
        if self.query_map is not None:
            asks = MappedQueries(asks, self.query_map)
        self.citations = Citations(self.settings.memory_dir)
        self.ledger = Ledger(self.settings.ledger_path, self.publisher,
                             self.settings.ledger_namespace)
        self.service = RecallService(
            self.settings, asks, self.index, self.store,
            self.metrics, self.citations,
            alerts=self.alerts, query_vectors=QueryVectors(
                self.settings.query_vector_cache_size, self.settings.query_vector_cache_s))
        self.admission = Admission(self.settings.max_concurrent_recalls,
                                   self.settings.recall_queue_wait_s, self.metrics.recalls_shed,
                                   self.metrics.recalls_in_flight)
        self.learner = PatternLearner(self.settings, self.store, self.publisher)
        self.continuity = SessionContinuity(self.settings, self.store, self.publisher)
        self.conclusions = ConclusionExtractor(self.metrics, self.settings.conclusions_enable)

    async def health(self) -> dict[str, dict[str, Any]]:
        async def check(name: str, coro: Any) -> tuple[str, dict[str, Any]]:
            try:
                ok = await asyncio.wait_for(coro, 2.0)
                return name, {"ok": bool(ok)}
            except Exception as exc:
                return name, {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:200]}

        async def embedder() -> bool:
            await self.embedder.embed_query("health")
            return True

        async def indexer() -> bool:
            reply = await self.index.admin(AdminRequest(verb="stats"), timeout=2.0)
            result = reply.result if reply.ok and isinstance(reply.result, dict) else {}
            # Answering is not enough: a tier whose writes are held or that is being refilled
            # from Postgres (after a crash) is not ready yet.
            not_ready = sorted({*(result.get("writes_held") or {}), *(result.get("reindex") or {})})
            if not_ready:
                raise RuntimeError(f"zvec tiers not writable/complete yet: {', '.join(not_ready)}")
            return reply.ok

        async def disk() -> bool:
            full = statedisk.disk_full(self.settings.memory_dir)
            if full:  # recall still works; ingest is refused with 507 until there is room
                raise RuntimeError(f"the state disk is full ({full})")
            return True

        results = await asyncio.gather(check("nats", self.publisher.ping()),
                                       check("postgres", self.store.ping()),
                                       check("embedder", embedder()), check("indexer", indexer()),
                                       check("disk", disk()))
        return dict(results)
