"""What the recall service needs from the outside world (real adapters in adapters.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from totalrecall_schema import (
    AdminReply,
    AdminRequest,
    Memory,
    MemoryEvent,
    VectorSearchReply,
    VectorSearchRequest,
)


class Embedder(Protocol):
    async def embed_query(self, text: str, *, exclusive: bool = False
                          ) -> tuple[list[float], str | None]:
        """(vector, model fingerprint). `exclusive`: nothing of the caller's runs beside it."""
        ...


class VectorIndex(Protocol):
    async def search(self, request: VectorSearchRequest) -> VectorSearchReply: ...

    async def admin(self, request: AdminRequest, timeout: float) -> AdminReply: ...


class PublishFailed(Exception):
    """The event stream did not confirm storing every event (no PubAck): none counts as
    stored; a retry with the same ids is safe (JetStream de-duplicates by `Nats-Msg-Id`)."""


class Publisher(Protocol):
    async def publish(self, events: Sequence[MemoryEvent]) -> list[bool]:
        """Publish durably; returns, per event, whether JetStream already had it. Raises
        `PublishFailed` when the stream does not confirm them (NATS away, its store failing)."""
        ...

    async def ping(self) -> bool: ...


class Store(Protocol):
    async def bm25(self, terms: Sequence[str], namespace: str, since: datetime | None,
                   category: str | None, limit: int) -> list[tuple[str, float]]: ...

    async def rows(self, keys: Sequence[str]) -> dict[str, Memory]: ...

    async def neighbours(self, keys: Sequence[str], window: int, max_gap_s: float,
                         since: datetime | None = None, category: str | None = None,
                         event_gap_s: float | None = None, known: Collection[str] = ()
                         ) -> dict[str, list[tuple[str, Memory | None]]]:
        """hit key → [(key, memory)] of the memories adjacent to it in its thread (within the
        request's timeframe and category). A store may answer None for a memory in `known`
        (the caller has its row already)."""
        ...

    async def recent(self, namespace: str, since: datetime | None, category: str | None,
                     limit: int, categories: Sequence[str] | None = None) -> list[Memory]: ...

    async def stats(self, namespace: str | None) -> dict[str, Any]: ...

    async def ping(self) -> bool: ...


@runtime_checkable
class RowsBM25(Protocol):
    """A store whose keyword search also returns each hit's row (one round trip fewer)."""

    async def bm25_rows(self, terms: Sequence[str], namespace: str, since: datetime | None,
                        category: str | None, limit: int) -> list[tuple[str, float, Memory]]: ...


@runtime_checkable
class PipelineLag(Protocol):
    """A publisher that can tell how far behind the pipeline's consumers are."""

    async def lag(self) -> dict[str, int | None]:
        """Stage (embedder, indexer) → messages it has yet to process or ack; None when its
        consumer cannot be asked."""
        ...
