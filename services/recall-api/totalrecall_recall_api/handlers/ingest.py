"""Routes that store memories: ingest, store, supersede, and flush (the turns about to be
compacted away)."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException
from pydantic import BaseModel, Field
from totalrecall_schema import IngestEvent, IngestResponse, MemoryEvent, memory_key
from totalrecall_schema.events import NAMESPACE_PATTERN

from ..core.conclusions import extract
from .common import C, content_text, publish, to_event

router = APIRouter()


@router.post("/ingest", response_model=IngestResponse)
async def ingest(c: C, body: Annotated[IngestEvent | list[IngestEvent], Body()]) -> IngestResponse:
    """Store one event or a list; asynchronous through the pipeline, durable on return."""
    items = body if isinstance(body, list) else [body]
    if not items:
        raise HTTPException(422, detail="no events given")
    if len(items) > c.settings.max_events_per_request:
        raise HTTPException(413, detail=f"at most {c.settings.max_events_per_request} events "
                                        "per request")
    events = [to_event(e, actor="system", category="conversation", subcategory="general")
              for e in items]
    # What the conversation turns among them concluded: memories of their own, stored with them.
    return await publish(c, events, c.conclusions.derive(events))

@router.post("/store", response_model=IngestResponse)
async def store(c: C, body: IngestEvent) -> IngestResponse:
    """The agent's explicit "remember this"."""
    return await publish(c, [to_event(body, actor="agent", category="conversation",
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
    event = to_event(new, actor="agent", category=old.category, subcategory=old.subcategory)
    return await publish(c, [event])

class FlushMessage(BaseModel):
    role: str = "user"
    content: str | list[Any] = ""


class FlushRequest(BaseModel):
    messages: list[FlushMessage] = Field(max_length=2000)
    sessionId: str = Field(default="session", min_length=1, max_length=200)
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)

@router.post("/flush", response_model=IngestResponse)
async def flush(c: C, body: FlushRequest) -> IngestResponse:
    """Save the messages about to be compacted away (idempotent per session + content)."""
    events: list[MemoryEvent] = []
    roles: list[str | None] = []
    for msg in body.messages:
        text = " ".join(content_text(msg.content).split())
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
    return await publish(c, events, c.conclusions.derive(events, roles))
