"""The memory event: what watchers publish, the embedder enriches and the indexer stores."""

from __future__ import annotations

import functools
import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .host import MAX_MACHINE_ID_CHARS, host_name, local_host, normalize_hostname
from .scrub import scrub_text, scrub_value
from .taxonomy import CATEGORIES, DEFAULT_CATEGORY, Severity

MAX_SUMMARY_CHARS = 2_000
MAX_DETAIL_CHARS = 32_000
MAX_METADATA_BYTES = 16_000
MAX_TAGS = 32
MAX_TAG_CHARS = 64
#: Events may be stamped slightly in the future (clock skew between machines), not more.
MAX_FUTURE_SKEW = timedelta(hours=24)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@/+=-]{0,199}$"
NAMESPACE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_SUBCATEGORY_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
_KEY_NAMESPACE = uuid.UUID("5d1f4b8e-52a4-4c55-9b5e-3c6c1f3f8a10")

EventId = Annotated[str, Field(pattern=ID_PATTERN, description="Stable id; the idempotency key.")]
Namespace = Annotated[str, Field(pattern=NAMESPACE_PATTERN, description="Memory namespace.")]


def new_event_id() -> str:
    return uuid.uuid4().hex


@functools.lru_cache(maxsize=8192)
def memory_key(namespace: str, event_id: str) -> str:
    """The storage key of a memory: unique per (namespace, id), safe as a Zvec doc id and PK.
    Memoised: each stage asks for the key of the events it handles many times over (dedup,
    batching, every store's row), and a uuid5 is a SHA-1 and a UUID object."""
    return uuid.uuid5(_KEY_NAMESPACE, f"{namespace}\x00{event_id}").hex


def utcnow() -> datetime:
    return datetime.now(UTC)


def assume_utc(v: datetime) -> datetime:
    """A time without a zone is UTC (the zone every stored timestamp is in)."""
    return v if v.tzinfo is not None else v.replace(tzinfo=UTC)


def _fit(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EventMetadata(BaseModel):
    """Structured fields used for filtering; unknown keys are kept (scrubbed)."""

    model_config = ConfigDict(extra="allow")

    severity: Severity = Severity.INFO
    service: str | None = None
    package: str | None = None
    path: str | None = None
    generation: int | None = None
    exit_code: int | None = None
    duration_ms: float | None = None
    tags: list[str] = Field(default_factory=list)
    #: The host the event happened on (`host.py`): a metadata field, not one of the event's
    #: own, so that events stay valid for a service of an older release (`MemoryEvent` takes
    #: no unknown field; metadata takes any) and the watchers' `host` of before is this one.
    #: A hostname, stored normalised (compared without case). Metadata was free-form before, so
    #: a structured value a client stored under `host` is kept as it was (`hostname`: its
    #: `name`). None only before `MemoryEvent` fills in the local host.
    host: Any = None
    machine_id: str | None = Field(default=None, max_length=MAX_MACHINE_ID_CHARS)

    @field_validator("host")
    @classmethod
    def _hostname(cls, v: Any) -> Any:
        return (normalize_hostname(v) or None) if isinstance(v, str) else v

    @property
    def hostname(self) -> str | None:
        """The hostname `host` names (None: it names none)."""
        return host_name(self.host)

    @field_validator("tags")
    @classmethod
    def _check_tags(cls, tags: list[str]) -> list[str]:
        if len(tags) > MAX_TAGS:
            raise ValueError(f"at most {MAX_TAGS} tags are allowed, got {len(tags)}")
        cleaned: list[str] = []
        for tag in tags:
            tag = tag.strip()
            if not tag:
                continue
            if len(tag) > MAX_TAG_CHARS:
                raise ValueError(f"tag longer than {MAX_TAG_CHARS} characters: {tag[:20]!r}…")
            if tag not in cleaned:
                cleaned.append(tag)
        return cleaned


def _without_nul(value: object) -> object:
    """`value` (JSON-like) with every NUL character removed from its strings and keys."""
    if isinstance(value, str):
        return value.replace("\x00", "") if "\x00" in value else value
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


class MemoryEvent(BaseModel):
    """One thing worth remembering. Secrets are scrubbed on construction, so every stage that
    builds or parses an event stores only scrubbed text."""

    model_config = ConfigDict(extra="forbid")

    id: EventId = Field(default_factory=new_event_id)
    timestamp: datetime = Field(default_factory=utcnow)
    namespace: Namespace = "default"
    category: str = DEFAULT_CATEGORY
    subcategory: str = "general"
    actor: str = Field(default="system", min_length=1, max_length=128)
    source: str = Field(default="api", min_length=1, max_length=128,
                        description="What produced the event: a watcher name, 'api', 'rebuild', …")
    summary: str = Field(min_length=1, max_length=MAX_SUMMARY_CHARS)
    detail: str = Field(default="", max_length=MAX_DETAIL_CHARS)
    metadata: EventMetadata = Field(default_factory=EventMetadata)

    @model_validator(mode="before")
    @classmethod
    def _drop_nul(cls, data: object) -> object:
        # Postgres text and jsonb cannot hold U+0000: one NUL in a log line would fail the
        # indexer's write, and every rebuild after it (the Markdown keeps the line).
        return _without_nul(data) if isinstance(data, dict) else data

    @field_validator("summary")
    @classmethod
    def _summary_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("summary must not be blank")
        return v

    @field_validator("category")
    @classmethod
    def _known_category(cls, v: str) -> str:
        if v not in CATEGORIES:
            raise ValueError(f"unknown category {v!r}; expected one of: {', '.join(CATEGORIES)}")
        return v

    @field_validator("subcategory")
    @classmethod
    def _subcategory_shape(cls, v: str) -> str:
        if not re.match(_SUBCATEGORY_PATTERN, v):
            raise ValueError("subcategory must be lowercase letters, digits, '_', '.', '-' (≤64)")
        return v

    @field_validator("timestamp")
    @classmethod
    def _sane_timestamp(cls, v: datetime) -> datetime:
        v = assume_utc(v).astimezone(UTC)
        if v.year < 1971:
            raise ValueError("timestamp before 1971 is not plausible")
        if v > utcnow() + MAX_FUTURE_SKEW:
            raise ValueError("timestamp is more than 24 hours in the future")
        return v

    @model_validator(mode="after")
    def _scrub_and_size(self) -> MemoryEvent:
        # A redaction marker can be longer than the secret it replaces: trim what scrubbing grew
        # past a limit, so that the event validates again in every later stage (no dead letter).
        self.summary = _fit(scrub_text(self.summary), MAX_SUMMARY_CHARS)
        self.detail = _fit(scrub_text(self.detail), MAX_DETAIL_CHARS)
        extra = self.metadata.model_extra
        if extra:
            extra.update(scrub_value(dict(extra)))
        for name in ("service", "package", "path"):
            val = getattr(self.metadata, name)
            if val is not None:
                setattr(self.metadata, name, scrub_text(val))
        self.metadata.tags = [_fit(scrub_text(t), MAX_TAG_CHARS) for t in self.metadata.tags]
        self._default_host()
        size = len(json.dumps(self.metadata.model_dump(mode="json"), default=str))
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"metadata is {size} bytes; the limit is {MAX_METADATA_BYTES}")
        return self

    def _default_host(self) -> None:
        """An event without a host happened where it is first built: the watcher's machine, the
        API's for an ingest, the indexer's for a record written before hosts were kept. A host
        named without a machine id gets this machine's only when it is this machine."""
        md = self.metadata
        if md.host is not None and md.machine_id is not None:
            return
        here = local_host()
        if md.host is None:
            # A machine id alone names another machine by its id (no name is known for it).
            mid = md.machine_id
            md.host = here.hostname if mid is None or mid == here.machine_id \
                else f"machine-{mid[:12]}"
            md.machine_id = mid or here.machine_id
        elif md.hostname == here.hostname:
            md.machine_id = here.machine_id

    @property
    def key(self) -> str:
        return memory_key(self.namespace, self.id)

    @property
    def host(self) -> str | None:
        """The hostname of the host the event happened on (None only when its metadata holds a
        structured `host` that names none)."""
        return self.metadata.hostname

    @property
    def ts_ms(self) -> int:
        return int(self.timestamp.timestamp() * 1000)

    @property
    def severity(self) -> Severity:
        return self.metadata.severity

    def embedding_text(self) -> str:
        """The text that gets embedded: summary first, then detail (models truncate the tail)."""
        if self.detail and self.detail.strip() != self.summary.strip():
            return f"{self.summary}\n{self.detail}"
        return self.summary


class EmbeddedEvent(BaseModel):
    """An event after the embedder: the vector (or none, when no model was available)."""

    model_config = ConfigDict(extra="forbid")

    event: MemoryEvent
    vector: list[float] | None = None
    model: str | None = Field(default=None, description="Fingerprint of the embedding model")
    dim: int | None = None
    repeat_count: int = Field(default=1, ge=1)
    last_seen: datetime | None = None
    embedded_at: datetime = Field(default_factory=utcnow)
    # Retired: the embedder no longer computes a second "technical" vector (the
    # indexer never used it). Still accepted so that messages of older embedders decode;
    # never written again.
    technical_vector: list[float] | None = Field(default=None, exclude=True, deprecated=True)
    technical_model: str | None = Field(default=None, exclude=True, deprecated=True)

    @property
    def embedded(self) -> bool:
        return self.vector is not None

    @model_validator(mode="after")
    def _dim_matches(self) -> EmbeddedEvent:
        if self.vector is not None:
            if self.dim is None:
                self.dim = len(self.vector)
            elif self.dim != len(self.vector):
                raise ValueError(f"vector has {len(self.vector)} dimensions, dim says {self.dim}")
        return self


class DeadLetter(BaseModel):
    """What goes to the dead-letter stream: the payload and why it can never succeed. Both are
    scrubbed: a payload that never became a MemoryEvent was never scrubbed as one, and a
    validation error quotes the input it refused."""

    stage: str
    reason: str
    subject: str
    payload: str
    failed_at: datetime = Field(default_factory=utcnow)

    @model_validator(mode="after")
    def _scrub(self) -> DeadLetter:
        self.reason = scrub_text(self.reason)
        self.payload = scrub_text(self.payload)
        return self
