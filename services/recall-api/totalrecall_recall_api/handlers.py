"""HTTP routes: thin. Validate, call the service or a port, shape the answer."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field, ValidationError
from totalrecall_schema import (
    AdminRequest,
    AlertsResponse,
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
from totalrecall_schema.ledger import (
    LedgerAppend,
    LedgerAppendResponse,
    LedgerBroken,
    LedgerEntry,
    LedgerReadResponse,
)

from . import stage_times, statedisk
from .admission import Overloaded
from .citations import scoped_text
from .container import Container
from .core import memory_md
from .core.categories import UnknownCategory, categories_of
from .core.conclusions import extract
from .core.continuity import Turn
from .core.supersede import subject_of
from .ports import Exporter, KeywordStatistics, PipelineLag, PublishFailed

router = APIRouter(prefix="/memory")


async def container(request: Request) -> Container:
    # async: FastAPI runs a plain `def` dependency in its thread pool, a thread hop per request.
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
    #: the namespaces the session reads (as for recall): the bundle covers all of them
    namespaces: list[Annotated[str, Field(pattern=NAMESPACE_PATTERN)]] | None = Field(
        default=None, max_length=16)

    def scope(self) -> list[str]:
        return read_scope(self.namespace, self.namespaces, "namespace" in self.model_fields_set)


class SessionEndMessage(BaseModel):
    role: str = "user"
    content: str | list[Any] = ""
    timestamp: datetime | None = None


class SessionEndRequest(BaseModel):
    sessionId: str = Field(min_length=1, max_length=200)
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)
    #: the session's messages; none: its stored turns (auto-capture, flushes) are summarised
    messages: list[SessionEndMessage] | None = Field(default=None, max_length=2000)


class AdminBody(BaseModel):
    namespace: str | None = Field(default=None, pattern=NAMESPACE_PATTERN)


def _to_event(e: IngestEvent, *, actor: str, category: str, subcategory: str) -> MemoryEvent:
    metadata = dict(e.metadata)
    if e.tags:
        metadata["tags"] = [*metadata.get("tags", []), *e.tags]
    category, subcategory = e.category or category, e.subcategory or subcategory
    # A fact a later one may replace ("the user now prefers neovim"): its subject, for the
    # indexer to mark the older memories of that subject superseded.
    subject = subject_of(e.summary, category, subcategory, metadata)
    if subject:
        metadata["subject"] = subject
    fields: dict[str, Any] = {
        "summary": e.summary, "detail": e.detail, "category": category,
        "subcategory": subcategory, "actor": e.actor or actor,
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


async def _publish(c: Container, events: list[MemoryEvent],
                   derived: list[MemoryEvent] | None = None) -> IngestResponse:
    """`derived`: memories derived from `events` (their conclusions), published in the same
    call after them; the answer counts `events` alone and lists the derived ids apart."""
    derived = [d for d in derived or [] if d.key not in {e.key for e in events}]
    try:
        published = await c.publisher.publish([*events, *derived])
    except PublishFailed as exc:
        # Not stored: a clear refusal the client can retry with the same ids (idempotent).
        full = statedisk.disk_full(c.settings.memory_dir)
        if full:
            raise HTTPException(507, detail=f"not stored: the state disk is full ({full}); "
                                            f"retry with the same ids once there is space "
                                            f"({exc})", headers={"Retry-After": "30"}) from None
        raise HTTPException(503, detail=f"not stored: the event stream did not confirm the "
                                        f"events ({exc}); retry with the same ids",
                            headers={"Retry-After": "5"}) from None
    for e in [*events, *derived]:
        c.metrics.ingested.labels(e.category).inc()
    duplicates = published[:len(events)]
    c.metrics.ingest_duplicates.inc(sum(published))
    return IngestResponse(ids=[e.id for e in events], accepted=len(events),
                          duplicates=sum(duplicates), derived=[d.id for d in derived])


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
    # What the conversation turns among them concluded: memories of their own, stored with them.
    return await _publish(c, events, c.conclusions.derive(events))


@router.post("/store", response_model=IngestResponse)
async def store(c: C, body: IngestEvent) -> IngestResponse:
    """The agent's explicit "remember this"."""
    return await _publish(c, [_to_event(body, actor="agent", category="conversation",
                                        subcategory="note")])


class SupersedeRequest(BaseModel):
    #: the memory replaced (an id of `namespace`), and the one that replaces it
    old_id: str = Field(min_length=1, max_length=200)
    new: IngestEvent
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)


@router.post("/supersede", response_model=IngestResponse)
async def supersede(c: C, body: SupersedeRequest) -> IngestResponse:
    """Store `new` as replacing `old_id`: recall ranks the old memory far below from then on
    (it stays, as history). `new` takes the old memory's category, subcategory and subject unless
    it names its own; 404 when there is no such memory."""
    namespace = body.new.namespace or body.namespace
    old = (await c.store.rows([memory_key(namespace, body.old_id)])).get(
        memory_key(namespace, body.old_id))
    if old is None:
        raise HTTPException(404, detail=f"no memory {body.old_id!r} in namespace {namespace!r}")
    new = body.new.model_copy(update={"namespace": namespace})
    metadata = dict(new.metadata)
    named = metadata.get("supersedes")
    metadata["supersedes"] = [*(named if isinstance(named, list) else []), body.old_id]
    if old.metadata.get("subject") and "subject" not in metadata:
        metadata["subject"] = old.metadata["subject"]
    new.metadata = metadata
    event = _to_event(new, actor="agent", category=old.category, subcategory=old.subcategory)
    return await _publish(c, [event])


def _categories(pattern: str | None) -> tuple[str, ...] | None:
    """The categories a request's `category` filter names (a category or a family such as
    `system.*`, `core/categories.py`); 422 with the reason when it names none."""
    try:
        return categories_of(pattern)
    except UnknownCategory as exc:
        raise HTTPException(422, detail=str(exc)) from None


@router.post("/recall", response_model=RecallResponse)
async def recall(c: C, body: RecallRequest, response: Response) -> RecallResponse:
    """The memories for a question (vector + keyword + recency, fused, MMR) and the
    `<system_memory>` block to put into the prompt; `namespaces` reads several at once,
    `host`/`hosts` only the memories of those hosts.
    503 with Retry-After when the service is saturated (admission.py). The `Server-Timing`
    header tells where this recall's time went (`stage_times`): `queue` is its wait for a slot."""
    _categories(body.category)
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
    categories = _categories(body.category)
    rows = await c.store.recent(body.namespace, datetime.fromtimestamp(since, UTC), None,
                                body.limit, categories)
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


@router.post("/file")
async def read_file(c: C, body: FileRequest) -> dict[str, str]:
    """A file of the Markdown ground truth; missing → empty text. A daily log shows only the
    caller's namespaces' memories, MEMORY.md only their sections (other lines are empty, so
    line numbers hold); nothing else in the memory directory is served."""
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
        return {"path": body.path,
                "text": memory_md.scoped(text, body.scope(), c.settings.memory_md_namespace)}
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
    roles: list[str | None] = []
    for msg in body.messages:
        text = " ".join(_content_text(msg.content).split())
        if msg.role not in ("user", "assistant"):
            continue
        # A short message says nothing worth a memory, unless the user decides something in it
        # ("Stop.", "Approved."): then it is the turn its decision is derived from.
        if len(text) < 12 and not (c.settings.conclusions_enable and msg.role == "user"
                                   and any(x.rule.category == "approval"
                                           for x in extract(text, "user"))):
            continue
        digest = hashlib.sha256(f"{body.sessionId}\x00{msg.role}\x00{text}".encode()).hexdigest()
        summary = f"{msg.role}: {text}"
        events.append(MemoryEvent(
            id=f"flush-{digest[:24]}", namespace=body.namespace, category="conversation",
            subcategory="flush", actor="user" if msg.role == "user" else "agent", source="flush",
            summary=summary[:2000], detail=text[:32000] if len(summary) > 2000 else "",
            # `session`, not `session_id`: the secret scrubber blanks any `session_id` value
            # (a web session's cookie), which put every flushed conversation in one thread.
            metadata={"tags": ["flush"], "session": body.sessionId}))
        roles.append(msg.role)
    if not events:
        return IngestResponse(ids=[], accepted=0)
    # What the turns concluded (the plugin's auto-capture comes this way too).
    return await _publish(c, events, c.conclusions.derive(events, roles))


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


@router.post("/ledger", response_model=LedgerAppendResponse)
async def ledger_append(c: C, body: LedgerAppend) -> LedgerAppendResponse:
    """Append one action of the agent to the hash-chained ledger (durable on return) and feed it
    to memory (category `agent.action`)."""
    try:
        entry, published = await c.ledger.append(body)
    except LedgerBroken as exc:
        raise HTTPException(409, detail=str(exc)) from None
    c.metrics.ingested.labels("agent.action").inc()
    return LedgerAppendResponse(entry=LedgerEntry(**entry), published=published)


@router.get("/ledger", response_model=LedgerReadResponse)
async def ledger_read(c: C, since_seq: Annotated[int, Query(ge=0)] = 0,
                      limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> LedgerReadResponse:
    """Entries after `since_seq`, oldest first (not verified: `totalrecall ledger verify`)."""
    entries = await c.ledger.read(since_seq, limit)
    return LedgerReadResponse(entries=[LedgerEntry(**e) for e in entries])


@router.post("/session/end")
async def session_end(c: C, body: SessionEndRequest) -> dict[str, Any]:
    """A finished session: its extractive summary (no LLM) is stored as a conversation memory
    (subcategory `session_summary`, one per session) that recall finds and the next session's
    warm-up shows."""
    turns = None
    if body.messages is not None:
        now = datetime.now(UTC)
        turns = [Turn(m.role, text, m.timestamp or now) for m in body.messages
                 if m.role in ("user", "assistant")
                 and (text := " ".join(_content_text(m.content).split()))]
    try:
        event = await c.continuity.end(body.namespace, body.sessionId, turns)
    except ValidationError as exc:  # what the messages said makes no memory (a date of year 308)
        reason = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                           for e in exc.errors())
        raise HTTPException(422, detail=f"the session's messages make no valid memory: "
                                        f"{reason}"[:500]) from None
    if event is None:
        return {"stored": False, "id": None, "summary": None}
    c.metrics.ingested.labels(event.category).inc()
    return {"stored": True, "id": event.id, "summary": event.summary, "detail": event.detail}


# --- learned user patterns ---------------------------------------------------------------------
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
