"""Models of the HTTP recall API (the contract in docs/architecture.md)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .alerts import Alert
from .events import (
    MAX_DETAIL_CHARS,
    MAX_SUMMARY_CHARS,
    EventId,
    MemoryEvent,
    Namespace,
    assume_utc,
)
from .host import MAX_HOSTNAME_CHARS, normalize_hostname
from .rpc import Tier

Timeframe = Literal["auto", "1h", "24h", "7d", "30d", "90d", "all"]

TIMEFRAMES: dict[str, timedelta | None] = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "90d": timedelta(days=90),
    "all": None,
}


class IngestEvent(BaseModel):
    """What a client sends; the server turns it into a `MemoryEvent`."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, max_length=MAX_SUMMARY_CHARS)
    detail: str = Field(default="", max_length=MAX_DETAIL_CHARS)
    category: str | None = None
    subcategory: str | None = None
    actor: str | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    id: EventId | None = None
    timestamp: datetime | None = None
    namespace: Namespace | None = None
    source: str | None = None


class IngestResponse(BaseModel):
    ids: list[str]
    accepted: int
    duplicates: int = 0
    #: The memories derived from the conversation turns given (what they concluded: diagnoses,
    #: fixes, the user's decisions, preferences and corrections), published with them; not
    #: counted in `accepted` or `duplicates`.
    derived: list[str] = Field(
        default_factory=list,
        description="ids of the memories derived from the conversation turns given (their "
                    "conclusions), stored with them; not counted in accepted/duplicates")


class RecallRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    query: str = Field(min_length=1, max_length=8_000)
    max_results: int = Field(default=6, ge=0, le=50, alias="maxResults")
    timeframe: Timeframe = "auto"
    category: str | None = None
    namespace: Namespace = "default"
    namespaces: list[Namespace] | None = Field(
        default=None, max_length=16,
        description="Several namespaces recalled at once (e.g. an agent's own and a shared "
                    "one): searched each, fused by score into one list of maxResults and one "
                    "block. Given with an explicit `namespace`, the two are unioned; given "
                    'alone, the default namespace is not added.')
    format: Literal["default", "openclaw"] = Field(
        default="default",
        description='"openclaw" adds `results` shaped like OpenClaw memory_search')
    as_of: datetime | None = Field(
        default=None, alias="asOf",
        description="When the question is asked (default: now; no zone means UTC). Relative "
                    'dates in the query ("last Saturday", "3 days ago"), the timeframe, recency '
                    "and the relative times in the block count from it.")

    host: str | None = Field(
        default=None, min_length=1, max_length=MAX_HOSTNAME_CHARS,
        description="Only memories of events that happened on this host (its hostname, "
                    "compared without case: `metadata.host`).")
    hosts: list[Annotated[str, Field(min_length=1, max_length=MAX_HOSTNAME_CHARS)]] | None = \
        Field(default=None, max_length=64,
              description="Only memories of these hosts (unioned with `host`). Without either, "
                          "every host's memories are recalled, and a question that names a "
                          "known host ranks that host's memories first.")

    @field_validator("as_of")
    @classmethod
    def _zoned(cls, v: datetime | None) -> datetime | None:
        return None if v is None else assume_utc(v)

    def host_filter(self) -> frozenset[str] | None:
        """The hosts this request is limited to (normalised); None: every host."""
        named = [self.host] if self.host else []
        found = frozenset(h for h in map(normalize_hostname, [*named, *(self.hosts or [])]) if h)
        return found or None

    def scope(self) -> list[str]:
        """The namespaces this request reads, in order (`namespace` first when it was given),
        without repeats."""
        return read_scope(self.namespace, self.namespaces, "namespace" in self.model_fields_set)


def read_scope(namespace: str, namespaces: list[str] | None, named: bool) -> list[str]:
    """The namespaces a request reads: `namespaces` after `namespace` when it was named (`named`),
    without repeats; `namespace` alone (its default included) when there is no list."""
    if not namespaces:
        return [namespace]
    return list(dict.fromkeys([*([namespace] if named else []), *namespaces]))


class Memory(BaseModel):
    id: str
    score: float
    timestamp: datetime
    category: str
    subcategory: str = "general"
    summary: str
    detail: str = ""
    tier: Tier | Literal["text"] = "hot"
    namespace: str = "default"
    actor: str = "system"
    severity: str = "info"
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    relative_time: str = ""


class OpenClawResult(BaseModel):
    """One hit in the shape OpenClaw's memory_search returns (path, line range, snippet)."""

    id: str
    path: str
    startLine: int  # OpenClaw's field names, camelCase
    endLine: int
    snippet: str
    score: float
    citation: str
    source: str = "memory"


class Degraded(BaseModel):
    """A part of recall that answered without one of its sources: the memories are what the
    others found (a recall never fails for a missing part)."""

    #: `vector` (the embedder or the index), `bm25` (keywords), `rows`, `neighbours`, …
    component: str
    reason: str
    #: Index partitions whose vector search had no answer (their memories were found by
    #: keywords only); None: not a partition's doing.
    partitions: list[int] | None = None


class RecallResponse(BaseModel):
    memories: list[Memory]
    system_memory: str
    took_ms: float = 0.0
    query_class: str = "task"
    results: list[OpenClawResult] | None = None
    #: The open alerts the block's `<system_alerts>` part shows (at most a few; all of them:
    #: `GET /memory/alerts`).
    alerts: list[Alert] = Field(default_factory=list)
    #: What this recall had to do without (empty: nothing; see `Degraded`).
    degraded: list[Degraded] = Field(default_factory=list)


class TimelineRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hours: float = Field(default=24, gt=0, le=24 * 365 * 10)
    category: str | None = None
    namespace: Namespace = "default"
    limit: int = Field(default=200, ge=1, le=5000)


class TimelineResponse(BaseModel):
    memories: list[Memory]


class ForgetRequest(BaseModel):
    """Forget memories by the ids recall returns, in one namespace (the memory's key is
    derived from both: an id names nothing in another namespace)."""

    model_config = ConfigDict(extra="forbid")

    ids: list[EventId] = Field(min_length=1, max_length=1000)
    namespace: Namespace = "default"


class ForgetResponse(BaseModel):
    #: How many of the ids were found (in Postgres or the Markdown) and are now gone from
    #: Postgres, every Zvec tier and the Markdown daily logs.
    forgotten: int
    #: Ids found nowhere (never stored, already forgotten, or still in the pipeline). They are
    #: tombstoned all the same: a memory still on its way is dropped when it arrives.
    missing: list[str] = Field(default_factory=list)


#: The fields of an exported line that are not the event's own (the pipeline sets them).
EXPORT_ONLY_FIELDS = frozenset({"repeat_count", "last_seen"})


class ExportedMemory(MemoryEvent):
    """One line of `GET /memory/export` (JSON lines, key order): the event exactly as stored,
    everything needed to ingest it again (`to_event()`), and how often it was seen (the
    pipeline's count of folded repeats, which an ingest cannot set)."""

    repeat_count: int = Field(default=1, ge=1)
    last_seen: datetime | None = None

    def to_event(self) -> dict[str, Any]:
        """The memory as an ingestible (MemoryEvent-shaped) JSON dict."""
        return self.model_dump(mode="json", exclude=set(EXPORT_ONLY_FIELDS))
