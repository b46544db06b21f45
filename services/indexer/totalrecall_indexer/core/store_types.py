"""What the core and the stores (adapters/) hand each other: the Postgres rows and the Zvec
documents written, the hits read back, and the tiers' errors and batch limit. Plain data: each
store turns them into its own types (a Zvec `Doc`, a Postgres row)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from totalrecall_schema.daily_log import LogRecord

#: The most documents one Zvec call reads or writes.
MAX_BATCH = 1024


class TierUnavailable(RuntimeError):
    """A tier takes no writes until an HNSW build has completed (see `build_guard`): its last
    build was interrupted, or a write to it just failed. Retry later; nothing is lost."""


class TierBuilding(RuntimeError):
    """The tier's HNSW build is running, or its writes and searches kept it busy past the
    search's wait: the search goes without the tier (`BuildExclusion`)."""


@dataclass
class PgRow:
    rec: LogRecord
    tier: str
    embedded: bool
    #: The index partition it belongs to (None: the index is not partitioned).
    part: int | None = None


@dataclass
class TierDoc:
    """A memory as a Zvec tier holds it (`adapters/zvec_schema.ZDoc` converts it)."""

    key: str
    vector: list[float]
    namespace: str
    category: str
    subcategory: str
    severity: str
    ts_ms: int
    id: str
    summary: str


@dataclass
class RawHit:
    key: str
    distance: float
    fields: dict[str, Any]
