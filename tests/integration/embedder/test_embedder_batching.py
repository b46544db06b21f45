"""Adaptive batching against a real nats-server and the real model: a backlog goes in full
batches, a lone event on an idle pipeline goes at once, and a partial batch waits up to the
deadline for more."""

from __future__ import annotations

from typing import Any

from prometheus_client import Histogram
from test_embedder_pipeline import (
    Collector,
    consumer_settled,
    publish_events,
    running,
    wait_for,
)
from totalrecall_embedder.metrics import Metrics
from totalrecall_embedder.settings import Settings
from totalrecall_schema import MemoryEvent, Topology


class BatchSizes:
    """The embedder's batch-size histogram, with each batch's size also kept in order."""

    def __init__(self, histogram: Histogram) -> None:
        self.histogram = histogram
        self.sizes: list[int] = []

    def observe(self, n: float) -> None:
        self.sizes.append(int(n))
        self.histogram.observe(n)


def watched() -> tuple[Metrics, BatchSizes]:
    metrics = Metrics()
    sizes = BatchSizes(metrics.batch_size)
    metrics.batch_size = sizes  # type: ignore[assignment]
    return metrics, sizes


def events(prefix: str, n: int) -> list[MemoryEvent]:
    return [MemoryEvent(id=f"{prefix}{i}", category="system.process",
                        summary=f"{prefix} event {i}: unit u{i} restarted on host h{i % 7}")
            for i in range(n)]


async def fetched_not_acked(nc: Any, topology: Topology, n: int) -> bool:
    """The embedder holds `n` messages it has not settled yet (a batch being filled)."""
    info = await nc.jetstream().consumer_info(topology.events_stream, topology.embedder_durable)
    return bool(info.num_ack_pending == n and info.num_pending == 0)


async def test_a_backlog_goes_in_full_batches(settings: Settings, nc: Any,
                                              topology: Topology) -> None:
    settings = settings.model_copy(update={"dedup_enabled": False, "batch_max": 8,
                                           "batch_deadline_s": 0.2})
    await publish_events(nc, topology, events("backlog", 20))  # before the embedder runs
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    metrics, sizes = watched()
    async with running(settings, metrics=metrics):
        await out.wait(20)
        await wait_for(lambda: consumer_settled(nc, topology), what="all events acked")
    assert sizes.sizes == [8, 8, 4]  # the last, partial one went once its deadline passed


async def test_a_lone_event_goes_at_once_and_a_partial_batch_waits_to_fill(
        settings: Settings, nc: Any, topology: Topology) -> None:
    # A deadline far beyond the waits below: only the lone event's own path can meet them.
    settings = settings.model_copy(update={"dedup_enabled": False, "batch_max": 8,
                                           "batch_deadline_s": 60.0})
    out = Collector(nc, topology, topology.embedded_stream, topology.embedded_all)
    metrics, sizes = watched()
    async with running(settings, metrics=metrics):
        await publish_events(nc, topology, events("lone", 1))
        await out.wait(1, timeout=20.0)
        assert sizes.sizes == [1]

    settings = settings.model_copy(update={"batch_deadline_s": 20.0})
    await publish_events(nc, topology, events("first", 3))  # pending when the embedder starts
    metrics, sizes = watched()
    async with running(settings, metrics=metrics):
        await wait_for(lambda: fetched_not_acked(nc, topology, 3), timeout=20.0,
                       what="the first three fetched and held")
        await publish_events(nc, topology, events("later", 5))
        await out.wait(1 + 8, timeout=60.0)
        await wait_for(lambda: consumer_settled(nc, topology), what="all events acked")
    assert sizes.sizes[0] > 3, sizes.sizes  # events that came while it waited joined the batch
    assert sum(sizes.sizes) == 8
