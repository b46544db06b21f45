"""The look-ups of a hybrid recall (its I/O stages): the question's vector search, the keyword
search, a diagnostic question's recent troubles, the rows of vector hits, the neighbours of the
best hits, the ends of processes (a question about now) and the newest repeats of a template.

Each is timed (`Stages.timed`) and left to the caller to guard (`Stages.guard`): which one may
fail without failing the recall is the pipeline's decision (`service.RecallService._hybrid`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from totalrecall_schema import (
    Degraded,
    RecallRequest,
    VectorFilter,
    VectorHit,
    VectorSearchRequest,
)

from ..core.categories import categories_of, category_list
from ..core.text import query_terms
from ..core.timeframe import visible_until
from ..ports import Embedder, Row, RowsBM25, Store, TemplateRows, VectorIndex
from ..recall.degraded import Stages, note
from ..recall.query_vectors import QueryVectors
from ..settings import Settings

#: The categories of a machine's own events (a diagnostic question's recent troubles).
SYSTEM_CATEGORIES = ("system.process", "system.service", "system.network", "system.storage",
                     "system.hardware", "system.pressure", "system.package", "system.config",
                     "error", "diagnosis", "system.container")

#: (key, keyword rank, the row when the store returned it with the hit)
KeywordHit = tuple[str, float, Row | None]
#: a hit's key → its neighbours (key, row; None: a row the caller holds already)
Neighbours = list[tuple[str, list[tuple[str, Row | None]]]]


def _ms(t: datetime | None) -> int | None:
    return int(t.timestamp() * 1000) if t is not None else None


@dataclass
class Sources(Stages):
    settings: Settings
    embedder: Embedder
    index: VectorIndex
    store: Store
    #: Vectors of questions asked lately (None: every question is embedded).
    query_vectors: QueryVectors | None = None

    async def embed(self, query: str, exclusive: bool) -> tuple[list[float], str | None]:
        def ask() -> Awaitable[tuple[list[float], str | None]]:
            return self.embedder.embed_query(query, exclusive=exclusive)

        return await self.timed("embed", ask() if self.query_vectors is None
                                else self.query_vectors.get(query, ask))

    async def vector(self, req: RecallRequest, since: datetime | None,
                     tiers: tuple[str, ...], escalation: tuple[str, ...],
                     embedded: asyncio.Event | None = None, *,
                     asked: str | None = None) -> list[VectorHit]:
        """`embedded`: a long query's keyword search waits on it (set once the embedding is
        back, or has failed); the embedding is then asked for as exclusive. `asked`: the text
        embedded, when not the query itself (without the speakers' names)."""
        s = self.settings
        try:
            vector, model = await self.embed(asked or req.query, embedded is not None)
        finally:
            if embedded is not None:
                embedded.set()
        flt = VectorFilter(namespace=req.namespace, since_ms=_ms(since),
                           until_ms=_ms(visible_until(req.as_of)),
                           categories=category_list(req.category))

        async def search(tier_set: tuple[str, ...]) -> list[VectorHit]:
            try:
                reply = await self.index.search(VectorSearchRequest(
                    vector=vector, model=model, topk=s.vector_candidates, tiers=list(tier_set),
                    filter=flt))  # type: ignore[arg-type]
            except TimeoutError:
                raise  # a busy index says nothing about the vector
            except Exception:
                # Its model may be one the index no longer takes: asked for again next time.
                if self.query_vectors is not None:
                    self.query_vectors.forget_model(model)
                refused = getattr(self.embedder, "model_refused", None)
                if refused is not None:  # a local query model compares itself again
                    refused(model)
                raise
            for tier, ms in reply.took_ms.items():
                if tier in ("hot", "warm", "cold"):
                    self.metrics.stage(f"vector_{tier}", ms / 1000)
            if reply.missing_partitions:
                self._missing(reply.missing_partitions)
            return reply.hits

        hits = await search(tiers)
        good = sum(1 for h in hits if h.score >= s.good_match_similarity)
        if escalation and good < s.min_good_matches:
            hits += await search(escalation)
        return hits

    def _missing(self, missing: list[int]) -> None:
        self.metrics.degraded.labels("vector partition").inc()
        many = len(missing) > 1
        note(Degraded(component="vector", partitions=missing,
                      reason=(f"no answer from the owner of index partition{'s' if many else ''} "
                              f"{', '.join(map(str, missing))}: keywords only for "
                              f"{'them' if many else 'it'}")))

    async def bm25(self, req: RecallRequest, since: datetime | None) -> list[KeywordHit]:
        """Keyword hits, with their rows when the store can return them in the same query."""
        terms = query_terms(req.query)
        args = (terms, req.namespace, since, categories_of(req.category),
                self.settings.bm25_candidates)
        allowed = req.host_filter()
        hosts = sorted(allowed) if allowed else None
        if isinstance(self.store, RowsBM25):
            found = await self.timed("bm25", self.store.bm25_rows(*args, hosts=hosts)
                                     if hosts else self.store.bm25_rows(*args))
            return [(k, r, m) for k, r, m in found]
        # Only a filtered search names hosts (a store that knows none takes no such argument).
        plain = await self.timed("bm25", self.store.bm25(*args, hosts=hosts)
                                 if hosts else self.store.bm25(*args))
        return [(k, r, None) for k, r in plain]

    async def recent_system(self, req: RecallRequest, now: datetime) -> list[Row]:
        """A diagnostic question: what went wrong on the machine in the last day."""
        cats = list(categories_of(req.category) or SYSTEM_CATEGORIES)
        rows = await self.timed("recent", self.store.recent_rows(
            req.namespace, now - timedelta(hours=24), None, 20, cats))
        return [m for m in rows if m.severity in ("warning", "error", "critical")][:10]

    async def rows(self, keys: Sequence[str]) -> list[tuple[str, Row]]:
        return list((await self.timed("rows", self.store.rows(list(dict.fromkeys(keys))))).items())

    async def neighbours(self, keys: list[str], since: datetime | None,
                         category: tuple[str, ...] | None, known: Collection[str]) -> Neighbours:
        s = self.settings
        found = await self.timed("neighbours", self.store.neighbours(
            keys, s.neighbour_window, s.neighbour_max_gap_s, since, category,
            s.neighbour_event_gap_s, known=list(known)))
        return list(found.items())

    async def process_ends(self, namespace: str, since: datetime) -> list[Row]:
        """The process events since `since` (their ends supersede older states)."""
        return await self.timed("process ends", self.store.recent_rows(
            namespace, since, "system.process", 500))

    async def newest_of_templates(self, req: RecallRequest, templates: list[str],
                                  since: datetime | None, until: datetime | None,
                                  n: int) -> list[Row]:
        """The newest `n` memories of each template, from a store that knows templates."""
        if not templates or not isinstance(self.store, TemplateRows):
            return []
        return await self.timed("repeats", self.store.newest_of_templates(
            req.namespace, templates, since, until, categories_of(req.category), n))
