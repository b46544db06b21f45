"""What the feature routes share: the container dependency, turning an API event into a memory
and publishing it (a full state disk: 507; the stream down: 503), the category filter."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from totalrecall_schema import IngestEvent, IngestResponse, MemoryEvent

from ..adapters import statedisk
from ..container import Container
from ..core.categories import UnknownCategory, categories_of
from ..core.supersede import subject_of
from ..ports import PublishFailed


async def container(request: Request) -> Container:
    # async: FastAPI runs a plain `def` dependency in its thread pool, a thread hop per request.
    return request.app.state.container  # type: ignore[no-any-return]


C = Annotated[Container, Depends(container)]


def to_event(e: IngestEvent, *, actor: str, category: str, subcategory: str) -> MemoryEvent:
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

async def publish(c: Container, events: list[MemoryEvent],
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

def category_filter(pattern: str | None) -> tuple[str, ...] | None:
    """The categories a request's `category` filter names (a category or a family such as
    `system.*`, `core/categories.py`); 422 with the reason when it names none."""
    try:
        return categories_of(pattern)
    except UnknownCategory as exc:
        raise HTTPException(422, detail=str(exc)) from None

def content_text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
    return "\n".join(p for p in parts if p)
