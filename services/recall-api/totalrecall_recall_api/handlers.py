"""HTTP routes: thin. Validate, call the service or a port, shape the answer."""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from totalrecall_schema import (
    AdminRequest,
    ForgetRequest,
    ForgetResponse,
    IngestEvent,
    IngestResponse,
    MemoryEvent,
    RecallRequest,
    RecallResponse,
    TimelineRequest,
    TimelineResponse,
    memory_key,
)
from totalrecall_schema.api import read_scope
from totalrecall_schema.events import NAMESPACE_PATTERN

from .citations import scoped_text
from .container import Container
from .ports import PipelineLag

router = APIRouter(prefix="/memory")


def container(request: Request) -> Container:
    return request.app.state.container  # type: ignore[no-any-return]


C = Annotated[Container, Depends(container)]


# --- request bodies that only the HTTP layer knows --------------------------------------------
class FileRequest(BaseModel):
    path: str = Field(min_length=1, max_length=1024)
    #: Whose memories a daily log shows (as for recall: `namespaces` adds readable ones, e.g.
    #: a shared namespace; given alone, the default namespace is not added).
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)
    namespaces: list[Annotated[str, Field(pattern=NAMESPACE_PATTERN)]] | None = Field(
        default=None, max_length=16)

    def scope(self) -> list[str]:
        return read_scope(self.namespace, self.namespaces, "namespace" in self.model_fields_set)


class FlushMessage(BaseModel):
    role: str = "user"
    content: str | list[Any] = ""


class FlushRequest(BaseModel):
    messages: list[FlushMessage] = Field(max_length=2000)
    sessionId: str = Field(default="session", min_length=1, max_length=200)
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)


class WarmRequest(BaseModel):
    sessionId: str = Field(default="session", max_length=200)
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)


class AdminBody(BaseModel):
    namespace: str | None = Field(default=None, pattern=NAMESPACE_PATTERN)


def _to_event(e: IngestEvent, *, actor: str, category: str, subcategory: str) -> MemoryEvent:
    metadata = dict(e.metadata)
    if e.tags:
        metadata["tags"] = [*metadata.get("tags", []), *e.tags]
    fields: dict[str, Any] = {
        "summary": e.summary, "detail": e.detail, "category": e.category or category,
        "subcategory": e.subcategory or subcategory, "actor": e.actor or actor,
        "source": e.source or "api", "metadata": metadata,
    }
    for name in ("id", "timestamp", "namespace"):
        value = getattr(e, name)
        if value is not None:
            fields[name] = value
    try:
        return MemoryEvent(**fields)
    except ValueError as exc:  # pydantic's message names the field and the reason
        raise HTTPException(422, detail=str(exc)) from None


async def _publish(c: Container, events: list[MemoryEvent]) -> IngestResponse:
    duplicates = await c.publisher.publish(events)
    for e in events:
        c.metrics.ingested.labels(e.category).inc()
    c.metrics.ingest_duplicates.inc(sum(duplicates))
    return IngestResponse(ids=[e.id for e in events], accepted=len(events),
                          duplicates=sum(duplicates))


@router.post("/ingest", response_model=IngestResponse)
async def ingest(c: C, body: Annotated[IngestEvent | list[IngestEvent], Body()]) -> IngestResponse:
    """Store one event or a list; asynchronous through the pipeline, durable on return."""
    items = body if isinstance(body, list) else [body]
    if not items:
        raise HTTPException(422, detail="no events given")
    if len(items) > c.settings.max_events_per_request:
        raise HTTPException(413, detail=f"at most {c.settings.max_events_per_request} events "
                                        "per request")
    events = [_to_event(e, actor="system", category="conversation", subcategory="general")
              for e in items]
    return await _publish(c, events)


@router.post("/store", response_model=IngestResponse)
async def store(c: C, body: IngestEvent) -> IngestResponse:
    """The agent's explicit "remember this"."""
    return await _publish(c, [_to_event(body, actor="agent", category="conversation",
                                        subcategory="note")])


@router.post("/recall", response_model=RecallResponse)
async def recall(c: C, body: RecallRequest) -> RecallResponse:
    return await c.service.recall(body)


@router.post("/timeline", response_model=TimelineResponse)
async def timeline(c: C, body: TimelineRequest) -> TimelineResponse:
    since = time.time() - body.hours * 3600
    rows = await c.store.recent(body.namespace, datetime.fromtimestamp(since, UTC), body.category,
                                body.limit)
    return TimelineResponse(memories=list(reversed(rows)))


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
    if isinstance(c.publisher, PipelineLag):
        # Events each stage has yet to process (pending + unacked), all namespaces together.
        out["pending"] = await c.publisher.lag()
    try:
        reply = await c.index.admin(AdminRequest(verb="stats"), timeout=2.0)
        out["index"] = reply.result if reply.ok else {"error": reply.error}
    except Exception as exc:
        out["index"] = {"error": f"indexer unavailable: {type(exc).__name__}"}
    return out


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
    return await _admin(c, "compact", body)


@router.post("/rebuild")
async def rebuild(c: C, body: AdminBody | None = None) -> JSONResponse:
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
    return ForgetResponse(forgotten=len(found_keys & by_key.keys()),
                          missing=[i for k, i in by_key.items() if k not in found_keys])


@router.post("/file")
async def read_file(c: C, body: FileRequest) -> dict[str, str]:
    """A file of the Markdown ground truth; missing → empty text. A daily log shows only the
    caller's namespaces (other lines are empty, so line numbers hold); MEMORY.md, curated by
    people, is served whole; nothing else in the memory directory is served."""
    root = c.settings.memory_dir.resolve()
    rel = body.path.removeprefix("memory/")
    try:
        target = (root / rel).resolve() if not Path(rel).is_absolute() else Path(rel).resolve()
        if root not in (target, *target.parents):
            raise HTTPException(400, detail="path must be inside the memory directory")
        if not target.is_file():
            return {"path": body.path, "text": ""}
        text = target.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError) as exc:  # a NUL byte, a name over NAME_MAX, …
        raise HTTPException(400, detail=f"unusable path: {type(exc).__name__}: {exc}") from None
    if target.parent == root / "daily":
        return {"path": body.path, "text": scoped_text(text, body.scope())}
    if target == root / "MEMORY.md":
        return {"path": body.path, "text": text}
    raise HTTPException(403, detail="only MEMORY.md and the daily logs (daily/*.md) are served")


@router.get("/source")
async def source(c: C, memory_id: Annotated[str, Query(alias="id", min_length=1, max_length=200)],
                 namespace: Annotated[str, Query(pattern=NAMESPACE_PATTERN)] = "default"
                 ) -> dict[str, Any]:
    """The Markdown record of one memory in its daily log (the ground truth), with its path
    and line range. Only a memory of `namespace` is found; 404 when there is none (or it was
    forgotten)."""
    found = await c.store.rows([memory_key(namespace, memory_id)])
    m = next(iter(found.values()), None)
    if m is None or m.namespace != namespace:
        raise HTTPException(404, detail=f"no memory {memory_id!r} in namespace {namespace!r}")
    day = f"{m.timestamp.astimezone(UTC):%Y-%m-%d}"
    record = await asyncio.to_thread(c.citations.source, namespace, memory_id, day)
    if record is None:
        raise HTTPException(404, detail=f"memory {memory_id!r} is not in "
                                        f"memory/daily/{day}.md (yet)")
    return {"id": memory_id, "namespace": namespace, "path": record.path,
            "startLine": record.start_line, "endLine": record.end_line, "text": record.text}


def _content_text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
    return "\n".join(p for p in parts if p)


@router.post("/flush", response_model=IngestResponse)
async def flush(c: C, body: FlushRequest) -> IngestResponse:
    """Save the messages about to be compacted away (idempotent per session + content)."""
    events: list[MemoryEvent] = []
    for msg in body.messages:
        text = " ".join(_content_text(msg.content).split())
        if len(text) < 12 or msg.role not in ("user", "assistant"):
            continue
        digest = hashlib.sha256(f"{body.sessionId}\x00{msg.role}\x00{text}".encode()).hexdigest()
        summary = f"{msg.role}: {text}"
        events.append(MemoryEvent(
            id=f"flush-{digest[:24]}", namespace=body.namespace, category="conversation",
            subcategory="flush", actor="user" if msg.role == "user" else "agent", source="flush",
            summary=summary[:2000], detail=text[:32000] if len(summary) > 2000 else "",
            metadata={"tags": ["flush"], "session": body.sessionId}))
    if not events:
        return IngestResponse(ids=[], accepted=0)
    return await _publish(c, events)


@router.post("/warm")
async def warm(c: C, body: WarmRequest | None = None) -> dict[str, Any]:
    """Touch the query path (embedder model, indexer, Postgres) before the first prompt."""
    t0 = time.perf_counter()
    warmed: dict[str, bool] = {}
    try:
        await c.embedder.embed_query("warm up")
        warmed["embedder"] = True
    except Exception:
        warmed["embedder"] = False
    warmed["postgres"] = await c.store.ping()
    return {"ok": all(warmed.values()), "warmed": warmed,
            "took_ms": round((time.perf_counter() - t0) * 1000, 2)}
