"""A memory written after the HNSW build is searchable at once (zvec brute-forces the part not in
the graph yet); index completeness per tier; the consumer-backlog, DLQ-depth and disk gauges."""

from __future__ import annotations

import re
from typing import Any

import httpx
from indexer_it_helpers import MODEL, Harness, make_event, running, unit_vectors, wait_for
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from totalrecall_indexer.adapters.nats_clients import refresh_runtime_gauges
from totalrecall_indexer.metrics import Metrics
from totalrecall_indexer.settings import Settings
from totalrecall_schema import VectorFilter, VectorSearchRequest


def gauge(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    assert m, f"{name}{labels} not exported"
    return float(m.group(1))


async def test_fresh_write_after_optimize_is_searchable_at_once(settings: Settings,
                                                               harness: Harness) -> None:
    vecs = unit_vectors(401, seed=40)
    events = [make_event(i, vecs[i]) for i in range(400)]
    async with running(settings) as app:
        idx = app.indexer
        await idx.index_batch(events)
        built = await idx.optimize_once(force=True)
        assert "hot" in built and idx.tiers.stats()["hot"]["index_completeness"] == 1.0

        fresh = make_event(400, vecs[400], category="error")
        await idx.index_batch([fresh])
        # no wait, no HNSW build: the new doc is found right away
        for flt in (VectorFilter(), VectorFilter(categories=["error"])):
            rep = await idx.search(VectorSearchRequest(vector=fresh.vector or [], model=MODEL,
                                                       topk=3, filter=flt))
            assert rep.hits[0].key == fresh.event.key and rep.hits[0].score > 0.99
        st = idx.tiers.stats()["hot"]
        assert st["doc_count"] == 401 and 0.99 < st["index_completeness"] < 1.0

        await idx.refresh_metrics()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as http:
            text = (await http.get("/metrics")).text
        ratio = gauge(text, "totalrecall_indexer_index_completeness_ratio", '{tier="hot"}')
        assert 0.99 < ratio < 1.0
        assert gauge(text, "totalrecall_indexer_docs", '{tier="hot"}') == 401

        await idx.optimize_once(force=True)
        assert idx.tiers.stats()["hot"]["index_completeness"] == 1.0


async def test_runtime_gauges(settings: Settings, harness: Harness) -> None:
    topo = harness.topology
    metrics = Metrics()
    await refresh_runtime_gauges(harness.nc, settings, metrics)  # no consumer yet: no error
    assert _value(metrics, "totalrecall_indexer_state_disk_free_bytes") > 0
    assert _value(metrics, "totalrecall_indexer_dlq_messages") == 0

    # a backlog for the durable indexer consumer, nothing consumed yet
    await harness.js.pull_subscribe(
        topo.embedded_all, durable=topo.indexer_durable, stream=topo.embedded_stream,
        config=ConsumerConfig(durable_name=topo.indexer_durable, ack_policy=AckPolicy.EXPLICIT,
                              deliver_policy=DeliverPolicy.ALL, ack_wait=120,
                              max_ack_pending=20_000, filter_subject=topo.embedded_all))
    vecs = unit_vectors(5, seed=41)
    await harness.publish([make_event(i, vecs[i]) for i in range(5)])
    for _ in range(2):
        await harness.js.publish(topo.dlq_subject("embedder"), b"{}", stream=topo.dlq_stream)
    await refresh_runtime_gauges(harness.nc, settings, metrics)
    assert _value(metrics, "totalrecall_indexer_consumer_pending") == 5
    assert _value(metrics, "totalrecall_indexer_dlq_messages") == 2

    # the running service refreshes them by itself and exports them
    settings = settings.model_copy(update={"metrics_interval_s": 0.2})
    async with running(settings) as app:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as http:
            async def drained() -> Any:
                text = (await http.get("/metrics")).text
                return (gauge(text, "totalrecall_indexer_consumer_pending") == 0
                        and gauge(text, "totalrecall_indexer_dlq_messages") == 2 and text)

            text = await wait_for(drained, what="backlog consumed, gauges refreshed")
        assert gauge(text, "totalrecall_indexer_state_disk_free_bytes") > 0
        assert "totalrecall_indexer_markdown_repairs_total 0.0" in text
        assert "totalrecall_indexer_memory_md_entries 0.0" in text


def _value(metrics: Metrics, name: str) -> float:
    for fam in metrics.registry.collect():
        for s in fam.samples:
            if s.name == name:
                return float(s.value)
    raise AssertionError(f"{name} not registered")
