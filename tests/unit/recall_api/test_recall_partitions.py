"""Recall over a partitioned index: the owners' answers merged, and a partition no one answered
for said in the response (keywords only for it), never a failure."""

from __future__ import annotations

from typing import Any

from test_recall_api import FakeWorld, _client
from totalrecall_recall_api.core.partitions import covered, merge_partition_replies
from totalrecall_schema import VectorHit, VectorSearchReply, VectorSearchRequest


def _hit(key: str, score: float) -> VectorHit:
    return VectorHit(key=key, id=key, score=score, tier="hot", timestamp_ms=1,
                     category="error", summary=key)


def test_answers_are_merged_best_first_one_hit_per_key() -> None:
    a = VectorSearchReply(hits=[_hit("k1", 0.9), _hit("k2", 0.5)], took_ms={"hot": 2.0},
                          partitions=[0])
    b = VectorSearchReply(hits=[_hit("k3", 0.7), _hit("k1", 0.95)], took_ms={"hot": 5.0},
                          partitions=[1, 2])
    merged = merge_partition_replies([a, b], 4, topk=2)
    assert [(h.key, h.score) for h in merged.hits] == [("k1", 0.95), ("k3", 0.7)]
    assert merged.took_ms == {"hot": 5.0}
    assert merged.partitions == [0, 1, 2] and merged.missing_partitions == [3]


def test_an_error_answer_covers_nothing() -> None:
    bad = VectorSearchReply(error="index is being rebuilt", partitions=[1])
    good = VectorSearchReply(hits=[_hit("k", 0.4)], partitions=[0])
    assert covered([bad, good]) == {0}
    merged = merge_partition_replies([bad, good], 2, topk=5)
    assert merged.missing_partitions == [1] and [h.key for h in merged.hits] == ["k"]


async def test_a_missing_partition_is_said_in_the_response() -> None:
    class HalfIndex(FakeWorld):
        async def search(self, request: VectorSearchRequest) -> VectorSearchReply:
            reply = await super().search(request)
            reply.partitions, reply.missing_partitions = [0], [1]
            return reply

    world = HalfIndex()
    c = await _client(world)
    await c.post("/memory/ingest", json={"summary": "nginx failed to start"})
    r = await c.post("/memory/recall", json={"query": "why did nginx fail?"})
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    assert [m["summary"] for m in body["memories"]] == ["nginx failed to start"]
    [d] = body["degraded"]
    assert d["component"] == "vector" and d["partitions"] == [1]
    assert "partition 1" in d["reason"] and "keywords" in d["reason"]
    text = (await c.get("/metrics")).text
    # Counted per search asked (the hot tier, then the deeper ones).
    assert 'totalrecall_recall_degraded_total{component="vector partition"}' in text


async def test_a_whole_component_missing_is_said_too() -> None:
    class NoIndex(FakeWorld):
        async def search(self, request: VectorSearchRequest) -> VectorSearchReply:
            raise TimeoutError("no index partition answered in 1.0 s")

    c = await _client(NoIndex())
    body = (await c.post("/memory/recall", json={"query": "what did I install?"})).json()
    assert body["degraded"] == [{"component": "vector", "partitions": None,
                                 "reason": "no index partition answered in 1.0 s"}]


async def test_nothing_degraded_says_so() -> None:
    c = await _client(FakeWorld())
    body = (await c.post("/memory/recall", json={"query": "what did I install?"})).json()
    assert body["degraded"] == []
