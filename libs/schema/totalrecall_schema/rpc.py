"""Request-reply payloads between recall-api, the embedder and the indexer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Tier = Literal["hot", "warm", "cold"]


class EmbedRequest(BaseModel):
    texts: list[str] = Field(min_length=1, max_length=1024)
    kind: Literal["query", "document"] = "query"
    #: The caller waits on this embedding alone, running nothing of its own beside it (recall
    #: with a long prompt starts its keyword search afterwards): the query RPC may then spread it
    #: over the embedder's parallel query threads, if nothing else on the machine is running.
    exclusive: bool = False


class EmbedReply(BaseModel):
    vectors: list[list[float]] | None = None
    model: str | None = None
    dim: int | None = None
    error: str | None = None
    took_ms: float = 0.0


class VectorFilter(BaseModel):
    namespace: str = "default"
    since_ms: int | None = None
    until_ms: int | None = None
    categories: list[str] | None = None
    severities: list[str] | None = None


class VectorSearchRequest(BaseModel):
    vector: list[float]
    model: str | None = Field(default=None, description="Fingerprint the vector was made with")
    topk: int = Field(default=20, ge=1, le=1000)
    tiers: list[Tier] = Field(default_factory=lambda: list[Tier](["hot"]))
    filter: VectorFilter = Field(default_factory=VectorFilter)


class VectorHit(BaseModel):
    key: str
    id: str
    score: float = Field(description="Cosine similarity, higher is better")
    tier: Tier
    timestamp_ms: int
    category: str
    summary: str


class VectorSearchReply(BaseModel):
    hits: list[VectorHit] = Field(default_factory=list)
    took_ms: dict[str, float] = Field(default_factory=dict)
    error: str | None = None
    #: The index partitions the answer covers (an indexer's own; None: the whole index, as a
    #: single indexer answers).
    partitions: list[int] | None = None
    #: Partitions no owner answered for in time (recall's merge of several answers).
    missing_partitions: list[int] = Field(default_factory=list)


class AdminRequest(BaseModel):
    verb: Literal["stats", "compact", "rebuild", "forget"]
    namespace: str | None = None
    keys: list[str] | None = None


class AdminReply(BaseModel):
    ok: bool = True
    result: dict[str, object] = Field(default_factory=dict)
    error: str | None = None
    #: As `VectorSearchReply.partitions`: the index partitions this answer is for (an indexer's
    #: leases; [] from a standby, which does nothing; None: the whole index, one indexer).
    partitions: list[int] | None = None
    #: Partitions no owner answered for in time (recall-api's merge of several answers).
    missing_partitions: list[int] = Field(default_factory=list)
