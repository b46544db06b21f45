"""Prometheus metrics of the embedder, on a per-app registry."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .core.device import ACTIVE_DEVICES

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.batch_size = Histogram(
            "totalrecall_embedder_batch_size", "Messages per consumed batch",
            buckets=_BATCH_BUCKETS, registry=r)
        self.embed_batch_seconds = Histogram(
            "totalrecall_embedder_embed_batch_seconds", "llama.cpp time per embedded batch",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.embed_item_seconds = Histogram(
            "totalrecall_embedder_embed_item_seconds", "llama.cpp time per text (batch / n)",
            buckets=_LATENCY_BUCKETS, registry=r)
        self.events_in = Counter(
            "totalrecall_embedder_events_in_total", "Messages consumed from the events stream",
            registry=r)
        self.events_out = Counter(
            "totalrecall_embedder_events_out_total",
            "EmbeddedEvents published (kind: embedded, reused = the vector of an earlier event "
            "of the same template, fallback = no vector, repeat)",
            ["kind"], registry=r)
        self.dead_letters = Counter(
            "totalrecall_embedder_dead_letters_total", "Invalid payloads sent to the DLQ",
            registry=r)
        self.dedup_dropped = Counter(
            "totalrecall_embedder_dedup_dropped_total",
            "Exact repeats (equal but for timestamps) folded into an earlier memory",
            registry=r)
        self.vectors_reused = Counter(
            "totalrecall_embedder_vectors_reused_total",
            "Memories stored with the embedding of an earlier event of the same template "
            "(differing only in numbers and ids)", registry=r)
        self.publish_errors = Counter(
            "totalrecall_embedder_publish_errors_total", "Publish failures (batch redelivered)",
            registry=r)
        self.fallback_state = Gauge(
            "totalrecall_embedder_fallback_state",
            "0: model running as asked; 1: no model (events flow on without vectors, "
            "backfilled later); 2: a GPU was asked for but the model runs on the CPU; "
            "3: the fallback embedding endpoint", registry=r)
        self.device_info = Gauge(
            "totalrecall_embedder_device_info",
            "1 for where vectors are made now (gpu, cpu, remote, none), 0 for the others",
            ["device"], registry=r)
        self.cache_requests = Counter(
            "totalrecall_embedder_cache_requests_total",
            "Embedding cache lookups (cache: disk = documents, query = in-memory LRU)",
            ["cache", "result"], registry=r)
        self.cache_entries = Gauge(
            "totalrecall_embedder_cache_entries", "Vectors in the disk embedding cache",
            registry=r)
        self.backfill_pending = Gauge(
            "totalrecall_embedder_backfill_pending",
            "Memories published without a vector, waiting for a model", registry=r)
        self.backfill_events = Counter(
            "totalrecall_embedder_backfill_total",
            "Backfill outcomes (republished with a vector, failed, dropped)", ["outcome"],
            registry=r)
        self.query_seconds = Histogram(
            "totalrecall_embedder_query_seconds", "RPC embed latency", ["kind"],
            buckets=_LATENCY_BUCKETS, registry=r)
        self.query_spread = Counter(
            "totalrecall_embedder_query_spread_total",
            "Exclusive queries (a recall's long prompt) by whether they were spread over the "
            "parallel query threads (spread) or kept on one because something else ran (busy)",
            ["outcome"], registry=r)
        self.rpc_requests = Counter(
            "totalrecall_embedder_rpc_requests_total", "RPC embed requests by kind and outcome",
            ["kind", "outcome"], registry=r)

        self.query_rpc_up = Gauge(
            "totalrecall_embedder_query_rpc_up",
            "1 while the query RPC's own NATS connection (its responder thread) is up",
            registry=r)
        self.consumer_pending = Gauge(
            "totalrecall_embedder_consumer_pending",
            "Messages the embedder's durable consumer has not acked yet (pending + ack pending)",
            registry=r)
        self.event_lag_seconds = Histogram(
            "totalrecall_embedder_event_lag_seconds",
            "Time from an event's arrival in JetStream to its consumption by the embedder",
            buckets=(*_LATENCY_BUCKETS, 30.0, 60.0, 300.0), registry=r)

    def cache_hook(self, cache: str, hits: int, misses: int) -> None:
        if hits:
            self.cache_requests.labels(cache=cache, result="hit").inc(hits)
        if misses:
            self.cache_requests.labels(cache=cache, result="miss").inc(misses)

    def spread_hook(self, spread: bool) -> None:
        self.query_spread.labels(outcome="spread" if spread else "busy").inc()

    def observe_engine(self, engine: Any) -> None:
        """Device and fallback gauges from the engine's current state."""
        device = engine.device if engine.available else "none"
        for d in ACTIVE_DEVICES:
            self.device_info.labels(device=d).set(1 if d == device else 0)
        self.fallback_state.set(engine.fallback_state)
        if engine.cache is not None:
            self.cache_entries.set(len(engine.cache))
