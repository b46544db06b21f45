"""Operations routes: health, stats, the indexer's compact/rebuild/forget, and export."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from totalrecall_schema import AdminRequest, ForgetRequest, ForgetResponse, memory_key
from totalrecall_schema.events import NAMESPACE_PATTERN

from ..container import Container
from ..ports import Exporter, KeywordStatistics, PipelineLag
from .common import C

router = APIRouter()


@router.get("/health")
async def health(c: C, request: Request) -> JSONResponse:
    """nats + postgres reachable → 200 (status "degraded" while the embedder or indexer is
    not); otherwise 503. Without the bearer token (when one is set) only the status is given."""
    checks = await c.health()
    core_ok = checks["nats"]["ok"] and checks["postgres"]["ok"]
    status = "ok" if all(v["ok"] for v in checks.values()) else "degraded"
    body: dict[str, Any] = {"status": status}
    if getattr(request.state, "authenticated", True):
        body["checks"] = checks
    return JSONResponse(body, status_code=200 if core_ok else 503)

@router.get("/stats")
async def stats(c: C, namespace: Annotated[str | None, Query(pattern=NAMESPACE_PATTERN)] = None
                ) -> dict[str, Any]:
    out: dict[str, Any] = {"namespace": namespace, **await c.store.stats(namespace)}
    if isinstance(c.store, KeywordStatistics):
        # The word counts keyword search weighs by (refreshed in the background).
        words = await c.store.keyword_statistics(namespace)
        if words is not None:
            out["keyword_statistics"] = words
    if isinstance(c.publisher, PipelineLag):
        # Events each stage has yet to process (pending + unacked), all namespaces together.
        out["pending"] = await c.publisher.lag()
    try:
        reply = await c.index.admin(AdminRequest(verb="stats"), timeout=2.0)
        out["index"] = reply.result if reply.ok else {"error": reply.error}
    except Exception as exc:
        out["index"] = {"error": f"indexer unavailable: {type(exc).__name__}"}
    return out

class AdminBody(BaseModel):
    namespace: str | None = Field(default=None, pattern=NAMESPACE_PATTERN)

async def _admin(c: Container, verb: Literal["compact", "rebuild"],
                 body: AdminBody | None) -> JSONResponse:
    try:
        request = AdminRequest(verb=verb, namespace=body.namespace if body else None)
        reply = await c.index.admin(request, timeout=c.settings.admin_timeout_s)
    except Exception as exc:
        raise HTTPException(503, detail=f"indexer unavailable: {type(exc).__name__}") from None
    return JSONResponse(reply.model_dump(mode="json"), status_code=200 if reply.ok else 500)


@router.post("/compact")
async def compact(c: C, body: AdminBody | None = None) -> JSONResponse:
    """Move memories between the Zvec tiers (hot, warm, cold) by age now."""
    return await _admin(c, "compact", body)


@router.post("/rebuild")
async def rebuild(c: C, body: AdminBody | None = None) -> JSONResponse:
    """Re-create Zvec and Postgres from the Markdown daily logs (the ground truth)."""
    return await _admin(c, "rebuild", body)

@router.post("/forget", response_model=ForgetResponse)
async def forget(c: C, body: ForgetRequest) -> ForgetResponse:
    """Forget memories everywhere (Postgres, Zvec, the Markdown ground truth), for good: the
    indexer keeps a tombstone, so a redelivered or replayed event does not bring them back.
    Only the request's namespace is touched (the keys derive from namespace and id), as
    ingest writes only the namespace it names."""
    ids = list(dict.fromkeys(body.ids))
    by_key = {memory_key(body.namespace, i): i for i in ids}
    try:
        reply = await c.index.admin(
            AdminRequest(verb="forget", keys=list(by_key), namespace=body.namespace),
            timeout=c.settings.admin_timeout_s)
    except Exception as exc:
        raise HTTPException(503, detail=f"indexer unavailable: {type(exc).__name__}") from None
    if not reply.ok:  # a store the indexer needs is down (or a tier takes no writes yet)
        raise HTTPException(503, detail=f"indexer could not forget: {reply.error}")
    found = reply.result.get("found")
    found_keys = set(found) if isinstance(found, list) else set()
    c.service.forgotten(body.namespace)
    return ForgetResponse(forgotten=len(found_keys & by_key.keys()),
                          missing=[i for k, i in by_key.items() if k not in found_keys])

@router.get("/export", response_class=StreamingResponse, responses={200: {
    "content": {"application/x-ndjson": {}},
    "description": "JSON lines, one `ExportedMemory` each, in key order"}})
async def export(c: C, namespace: Annotated[str, Query(pattern=NAMESPACE_PATTERN)] = "default"
                 ) -> StreamingResponse:
    """Every memory of a namespace, one JSON object per line (`ExportedMemory`: the event as
    stored, ready to ingest again, and its repeat count), streamed from Postgres in key order."""
    store = c.store
    if not isinstance(store, Exporter):
        raise HTTPException(501, detail="this store cannot export")

    async def lines() -> AsyncIterator[bytes]:
        async for row in store.export_rows(namespace):
            yield (json.dumps(row, ensure_ascii=False) + "\n").encode()

    return StreamingResponse(lines(), media_type="application/x-ndjson")
