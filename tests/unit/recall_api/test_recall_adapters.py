"""Adapters with a stand-in NATS client: subjects, payloads and timeouts."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from totalrecall_recall_api.adapters import NatsEmbedder, NatsVectorIndex, UpstreamError
from totalrecall_schema import EmbedReply, EmbedRequest, Topology, VectorSearchReply, VectorSearchRequest


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
