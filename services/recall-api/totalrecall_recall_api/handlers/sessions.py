"""Routes of an agent's session: its action ledger and its end (the session summary)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field, ValidationError
from totalrecall_schema.events import NAMESPACE_PATTERN
from totalrecall_schema.ledger import (
    LedgerAppend,
    LedgerAppendResponse,
    LedgerBroken,
    LedgerEntry,
    LedgerReadResponse,
)

from ..core.continuity import Turn
from .common import C, content_text

router = APIRouter()


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

class SessionEndMessage(BaseModel):
    role: str = "user"
    content: str | list[Any] = ""
    timestamp: datetime | None = None


class SessionEndRequest(BaseModel):
    sessionId: str = Field(min_length=1, max_length=200)
    namespace: str = Field(default="default", pattern=NAMESPACE_PATTERN)
    #: the session's messages; none: its stored turns (auto-capture, flushes) are summarised
    messages: list[SessionEndMessage] | None = Field(default=None, max_length=2000)

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
                 and (text := " ".join(content_text(m.content).split()))]
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
