"""Routes that read memories for a prompt: recall, timeline, and the session-start warm-up."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Response
from pydantic import BaseModel, Field
from totalrecall_schema import RecallRequest, RecallResponse, TimelineRequest, TimelineResponse
from totalrecall_schema.api import read_scope
from totalrecall_schema.events import NAMESPACE_PATTERN

from ..recall import stage_times
from ..recall.admission import Overloaded
from .common import C, category_filter

router = APIRouter()


@router.post("/recall", response_model=RecallResponse)
async def recall(c: C, body: RecallRequest, response: Response) -> RecallResponse:
    """The memories for a question (vector + keyword + recency, fused, MMR) and the
    `<system_memory>` block to put into the prompt; `namespaces` reads several at once,
    `host`/`hosts` only the memories of those hosts.
    503 with Retry-After when the service is saturated (recall/admission.py).
    The `Server-Timing` header tells where this recall's time went (recall/stage_times.py):
    `queue` is its wait for a slot."""
    category_filter(body.category)
    with stage_times.collecting() as times:
        t0 = time.perf_counter()
        try:
            async with c.admission.slot():
                c.metrics.stage("queue", time.perf_counter() - t0)
                found = await c.service.recall(body)
        except Overloaded as exc:
            raise HTTPException(503, detail=str(exc), headers={"Retry-After": "1"}) from None
    response.headers["Server-Timing"] = stage_times.server_timing(times)
    return found

@router.post("/timeline", response_model=TimelineResponse)
async def timeline(c: C, body: TimelineRequest) -> TimelineResponse:
    since = time.time() - body.hours * 3600
    categories = category_filter(body.category)
    rows = await c.store.recent(body.namespace, datetime.fromtimestamp(since, UTC), None,
                                body.limit, categories)
    return TimelineResponse(memories=list(reversed(rows)))

class WarmRequest(BaseModel):
    sessionId: str = Field(default="session", max_length=200)
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)
    #: the namespaces the session reads (as for recall): the bundle covers all of them
    namespaces: list[Annotated[str, Field(pattern=NAMESPACE_PATTERN)]] | None = Field(
        default=None, max_length=16)

    def scope(self) -> list[str]:
        return read_scope(self.namespace, self.namespaces, "namespace" in self.model_fields_set)

@router.post("/warm")
async def warm(c: C, body: WarmRequest | None = None) -> dict[str, Any]:
    """Preload the query path before the first prompt (the embedder's model, Postgres, the
    namespaces' term statistics) and answer the session-start bundle: today's and yesterday's
    essentials, the last session's summary and MEMORY.md (`bundle.text`: the block to inject)."""
    body = body or WarmRequest()
    scope = body.scope()
    t0 = time.perf_counter()
    warmed: dict[str, bool] = {}

    async def embedder() -> None:
        try:
            await c.embedder.embed_query("warm up")
            warmed["embedder"] = True
        except Exception:
            warmed["embedder"] = False

    async def terms() -> None:
        try:
            warmed["term_stats"] = all(await asyncio.gather(*(c.store.warm_terms(ns)
                                                              for ns in scope)))
        except Exception:
            warmed["term_stats"] = False

    bundle: dict[str, Any] = {}

    async def session_start() -> None:
        try:
            bundle.update(await c.continuity.bundle(scope))
            warmed["bundle"] = True
        except Exception:
            warmed["bundle"] = False

    await asyncio.gather(embedder(), terms(), session_start())
    warmed["postgres"] = await c.store.ping()
    return {"ok": all(warmed.values()), "warmed": warmed, "bundle": bundle or None,
            "session_context": bundle.get("text", ""),
            "took_ms": round((time.perf_counter() - t0) * 1000, 2)}
