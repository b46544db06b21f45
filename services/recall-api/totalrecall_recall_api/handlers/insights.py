"""Routes over what the memories show: learned user patterns and alerts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field
from totalrecall_schema import AlertsResponse
from totalrecall_schema.events import NAMESPACE_PATTERN

from .common import C

router = APIRouter()


class PatternsRequest(BaseModel):
    #: one namespace; none: every namespace (or `TR_RECALL_PATTERNS_NAMESPACES`)
    namespace: str | None = Field(default=None, pattern=NAMESPACE_PATTERN)


@router.post("/patterns/refresh")
async def refresh_patterns(c: C, body: PatternsRequest | None = None) -> dict[str, Any]:
    """Learn the user's patterns now (the background refresh runs the same daily); answers the
    pattern memories stored by this refresh (new or changed), each with its evidence."""
    namespaces = [body.namespace] if body and body.namespace else await c.learner.namespaces()
    stored: list[dict[str, Any]] = []
    for ns in namespaces:
        for e in await c.learner.refresh(ns):
            md = e.metadata.model_extra or {}
            stored.append({"id": e.id, "namespace": ns, "subcategory": e.subcategory,
                           "summary": e.summary, "confidence": md.get("confidence"),
                           "observations": md.get("observations"),
                           "evidence": md.get("evidence", [])})
    return {"namespaces": namespaces, "stored": stored}

@router.get("/alerts", response_model=AlertsResponse)
async def alerts(c: C, namespace: Annotated[str, Query(pattern=NAMESPACE_PATTERN)] = "default",
                 state: Literal["open", "all"] = "open") -> AlertsResponse:
    """The namespace's alerts, its events examined now (recalls show the background task's
    latest); `state=all` adds the resolved ones whose resolution is still in the events."""
    if c.alerts is None:
        raise HTTPException(503, detail="alerts are off (TR_RECALL_ALERTS_ENABLED) or have no "
                                        "Postgres to read")
    try:
        checked_at, found = await c.alerts.examine(namespace)
    except Exception as exc:
        raise HTTPException(503, detail=f"postgres unavailable: {type(exc).__name__}") from None
    shown = found if state == "all" else [a for a in found if a.state == "open"]
    return AlertsResponse(alerts=shown, namespace=namespace, checked_at=checked_at)
