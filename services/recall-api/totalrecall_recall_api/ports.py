"""What the recall service needs from the outside world (real adapters in `adapters/`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Sequence
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

from .core.alerts import EventRow
from .core.neighbours import NeighbourRow
from .core.supersede import ProcessRow

#: A category filter as the stores take it: one category, or any of several (a family such as
#: `system.*`, expanded by `core/categories.py`); None: every category.
CategoryFilter = str | Sequence[str] | None


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


class Row(NeighbourRow, ProcessRow, Protocol):
    """A stored memory as ranking reads it (what expansion and the supersede checks read, and
    the rest below). A recall ranks a hundred rows or more and returns a few: `memory()` builds
    the `Memory` of a row that leaves the service (a new one each call). Its `metadata` is read
    only: it may be shared with other rows of the same metadata."""

    @property
    def id(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def detail(self) -> str: ...
    @property
    def tier(self) -> str: ...
    @property
    def severity(self) -> str: ...

    def memory(self) -> Memory: ...


class Store(Protocol):
    async def bm25(self, terms: Sequence[str], namespace: str, since: datetime | None,
                   category: CategoryFilter, limit: int, hosts: Sequence[str] | None = None
                   ) -> list[tuple[str, float]]:
        """`hosts`: only memories of these hosts (given only when a request names hosts)."""
        ...

    async def rows(self, keys: Sequence[str]) -> dict[str, Row]: ...

    async def neighbours(self, keys: Sequence[str], window: int, max_gap_s: float,
                         since: datetime | None = None, category: CategoryFilter = None,
                         event_gap_s: float | None = None, known: Collection[str] = ()
                         ) -> dict[str, list[tuple[str, Row | None]]]:
        """hit key → [(key, memory)] of the memories adjacent to it in its thread (within the
        request's timeframe and category). A store may answer None for a memory in `known`
        (the caller has its row already)."""
        ...

    async def recent(self, namespace: str, since: datetime | None, category: str | None,
                     limit: int, categories: Sequence[str] | None = None) -> list[Memory]: ...

    async def recent_rows(self, namespace: str, since: datetime | None, category: str | None,
                          limit: int, categories: Sequence[str] | None = None) -> list[Row]:
        """`recent` as rows, for ranking (most of them never leave the service)."""
        ...

    async def session(self, namespace: str, session_id: str, limit: int) -> list[Memory]:
        """One conversation's memories (metadata session / session_id), oldest first."""
        ...

    async def notable(self, namespace: str, since: datetime, limit: int) -> list[Memory]:
        """Warnings, errors and notable changes since `since`, newest first."""
        ...

    async def latest(self, namespace: str, category: str, subcategory: str
                     ) -> Memory | None: ...

    async def warm_terms(self, namespace: str) -> bool: ...

    async def current_facts(self, namespace: str, limit: int) -> list[Memory]:
        """The newest memories with a `metadata.subject` not superseded."""
        ...

    async def namespaces(self) -> list[str]: ...

    async def stats(self, namespace: str | None) -> dict[str, Any]: ...

    async def ping(self) -> bool: ...


@runtime_checkable
class RowsBM25(Protocol):
    """A store whose keyword search also returns each hit's row (one round trip fewer)."""

    async def bm25_rows(self, terms: Sequence[str], namespace: str, since: datetime | None,
                        category: CategoryFilter, limit: int, hosts: Sequence[str] | None = None
                        ) -> list[tuple[str, float, Row]]: ...


@runtime_checkable
class TemplateRows(Protocol):
    """A store that knows each memory's template (the indexer's migration 9)."""

    async def newest_of_templates(self, namespace: str, templates: Sequence[str],
                                  since: datetime | None, until: datetime | None,
                                  category: CategoryFilter, per_template: int) -> list[Row]: ...


@runtime_checkable
class KnownSpeakers(Protocol):
    """A store that knows who speaks in a namespace's conversations (the indexer's migration
    17)."""

    async def speakers(self, namespace: str) -> list[str]:
        """The actors of the namespace's conversation memories, sorted."""
        ...


@runtime_checkable
class KnownHosts(Protocol):
    """A store that knows the hosts a namespace's memories happened on (the indexer's migration
    15)."""

    async def hosts(self, namespace: str) -> list[str]:
        """The namespace's hosts (normalised hostnames), sorted."""
        ...


@runtime_checkable
class KeywordStatistics(Protocol):
    """A store whose keyword search weighs words by counts it keeps (`termstats.TermStats`)."""

    async def keyword_statistics(self, namespace: str | None) -> dict[str, Any] | None:
        """What a namespace's next search weighs its words by; None before any are read."""
        ...


@runtime_checkable
class PipelineLag(Protocol):
    """A publisher that can tell how far behind the pipeline's consumers are."""

    async def lag(self) -> dict[str, int | None]:
        """Stage (embedder, indexer) → messages it has yet to process or ack; None when its
        consumer cannot be asked."""


@runtime_checkable
class Exporter(Protocol):
    """A store that can stream every memory of a namespace (`GET /memory/export`)."""

    def export_rows(self, namespace: str) -> AsyncIterator[dict[str, Any]]:
        """`ExportedMemory` JSON dicts in key order, in constant memory."""
        ...


class AlertRows(Protocol):
    """The stored events the alert rules read (`alert_store.PostgresAlertRows`)."""

    async def window_rows(self, namespace: str, since: datetime, crash_since: datetime,
                          limit: int) -> list[EventRow]:
        """Unit failures/successes since `since`, crash reports (coredumps since
        `crash_since`), newest first."""
        ...

    async def storage_rows(self, namespace: str, since: datetime, limit: int) -> list[EventRow]: ...

    async def unit_states(self, namespace: str) -> list[EventRow]:
        """Each unit's newest `system.service` event."""
        ...

    async def last_activity(self, namespace: str, units: Sequence[str],
                            since: datetime) -> dict[str, datetime]:
        """The newest event about each of `units` since `since` (units without one left out)."""
        ...
