"""Shared models, taxonomy and NATS topology of Total Recall."""

from .alerts import Alert, AlertsResponse
from .api import (
    TIMEFRAMES,
    ExportedMemory,
    ForgetRequest,
    ForgetResponse,
    IngestEvent,
    IngestResponse,
    Memory,
    OpenClawResult,
    RecallRequest,
    RecallResponse,
    Timeframe,
    TimelineRequest,
    TimelineResponse,
)
from .events import (
    DeadLetter,
    EmbeddedEvent,
    EventMetadata,
    MemoryEvent,
    memory_key,
    new_event_id,
    utcnow,
)
from .rpc import (
    AdminReply,
    AdminRequest,
    EmbedReply,
    EmbedRequest,
    Tier,
    VectorFilter,
    VectorHit,
    VectorSearchReply,
    VectorSearchRequest,
)
from .scrub import REDACTED, scrub_text, scrub_value
from .taxonomy import CATEGORIES, Severity
from .tiers import TierPolicy
from .topology import Topology, ensure_streams

__all__ = [
    "CATEGORIES",
    "REDACTED",
    "TIMEFRAMES",
    "AdminReply",
    "AdminRequest",
    "Alert",
    "AlertsResponse",
    "DeadLetter",
    "EmbedReply",
    "EmbedRequest",
    "EmbeddedEvent",
    "EventMetadata",
    "ExportedMemory",
    "ForgetRequest",
    "ForgetResponse",
    "IngestEvent",
    "IngestResponse",
    "Memory",
    "MemoryEvent",
    "OpenClawResult",
    "RecallRequest",
    "RecallResponse",
    "Severity",
    "Tier",
    "TierPolicy",
    "Timeframe",
    "TimelineRequest",
    "TimelineResponse",
    "Topology",
    "VectorFilter",
    "VectorHit",
    "VectorSearchReply",
    "VectorSearchRequest",
    "ensure_streams",
    "memory_key",
    "new_event_id",
    "scrub_text",
    "scrub_value",
    "utcnow",
]
