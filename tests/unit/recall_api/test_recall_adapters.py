"""Adapters with a stand-in NATS client: subjects, payloads and timeouts."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from totalrecall_recall_api.adapters import NatsEmbedder, NatsVectorIndex, UpstreamError, memory_of
from totalrecall_schema import (
    EmbedReply,
    EmbedRequest,
    Memory,
    Topology,
    VectorSearchReply,
    VectorSearchRequest,
)


class FakeNC:
    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.calls: list[tuple[str, bytes, float]] = []

    async def request(self, subject: str, data: bytes, timeout: float) -> Any:
        self.calls.append((subject, data, timeout))
        return SimpleNamespace(data=self.reply)


TOPO = Topology.for_test("adapters")


async def test_hot_searches_get_the_short_timeout_deep_ones_the_long() -> None:
    nc = FakeNC(VectorSearchReply().model_dump_json().encode())
    index = NatsVectorIndex(nc, TOPO, 1.0, 2.5)  # type: ignore[arg-type]
    await index.search(VectorSearchRequest(vector=[1.0], tiers=["hot"]))
    await index.search(VectorSearchRequest(vector=[1.0], tiers=["warm", "cold"]))
    assert [(s, t) for s, _, t in nc.calls] == [(TOPO.rpc_vector_search, 1.0),
                                                (TOPO.rpc_vector_search, 2.5)]


async def test_embedder_request_and_errors() -> None:
    nc = FakeNC(EmbedReply(vectors=[[0.6, 0.8]], model="m:1").model_dump_json().encode())
    emb = NatsEmbedder(nc, TOPO, 1.0)  # type: ignore[arg-type]
    assert await emb.embed_query("why slow") == ([0.6, 0.8], "m:1")
    subject, data, timeout = nc.calls[0]
    assert subject == TOPO.rpc_embed_query and timeout == 1.0
    assert EmbedRequest.model_validate_json(data) == EmbedRequest(texts=["why slow"], kind="query")
    nc.reply = EmbedReply(error="model not loaded").model_dump_json().encode()
    with pytest.raises(UpstreamError, match="model not loaded"):
        await emb.embed_query("x")


def _row(**over: Any) -> dict[str, Any]:
    """A `memories` row as asyncpg hands it over (metadata as JSON text)."""
    row: dict[str, Any] = {
        "key": "k1", "id": "m1", "namespace": "ns", "ts": datetime(2026, 11, 27, 2, 0, tzinfo=UTC),
        "category": "system.process", "subcategory": "high_cpu", "actor": "system",
        "severity": "warning", "tags": ["cpu"], "summary": "python3 (PID 4182) using 97% CPU",
        "detail": "", "metadata": '{"pid": 4182, "process": "python3"}', "tier": "warm",
        "superseded_by": None}
    return {**row, **over}


def test_rows_become_the_memories_model_construct_builds() -> None:
    """`memory_of` skips `model_construct`'s walk of the fields, not anything it records: the same
    values, the same fields set, and a memory that behaves like any other."""
    want = Memory.model_construct(
        id="m1", score=0.5, timestamp=datetime(2026, 11, 27, 2, 0, tzinfo=UTC),
        category="system.process", subcategory="high_cpu", summary="python3 (PID 4182) using 97% CPU",
        detail="", tier="warm", namespace="ns", actor="system", severity="warning", tags=["cpu"],
        metadata={"pid": 4182, "process": "python3"})
    got = memory_of(_row(), 0.5)
    assert got == want and got.model_fields_set == want.model_fields_set
    assert got.model_dump_json() == want.model_dump_json()
    assert list(got.__dict__) == list(want.__dict__)
    got.relative_time = "now"
    assert "relative_time" in got.model_fields_set and got.model_dump()["relative_time"] == "now"
    assert memory_of(_row(tier="text")).tier == "hot"


def test_decoded_metadata_is_each_memorys_own() -> None:
    """Metadata decoded once per text is still a dict per memory: changing one memory's (as a
    recall does with its scores) changes no other's."""
    a, b = memory_of(_row()), memory_of(_row())
    a.metadata["_scores"] = {"bm25": 1.0}
    assert "_scores" not in b.metadata and "_scores" not in memory_of(_row()).metadata
    old = memory_of(_row(superseded_by="m2"))
    assert old.metadata == {"pid": 4182, "process": "python3", "superseded_by": "m2"}
    assert "superseded_by" not in memory_of(_row()).metadata
    assert memory_of(_row(metadata=None)).metadata == {}
    assert memory_of(_row(metadata="null")).metadata == {}
    assert memory_of(_row(metadata={"service": "nginx"})).metadata == {"service": "nginx"}
