"""Prometheus metrics of the embedder, on a per-app registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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
            "EmbeddedEvents published (kind: embedded, fallback = no vector, repeat)",
            ["kind"], registry=r)
        self.dead_letters = Counter(
            "totalrecall_embedder_dead_letters_total", "Invalid payloads sent to the DLQ",
            registry=r)
        self.dedup_dropped = Counter(
            "totalrecall_embedder_dedup_dropped_total",
            "Repeated memories folded into an earlier one (not re-embedded)", registry=r)
        self.publish_errors = Counter(
            "totalrecall_embedder_publish_errors_total", "Publish failures (batch redelivered)",
            registry=r)
        self.fallback_state = Gauge(
            "totalrecall_embedder_fallback_state",
            "1 when no model is loaded (events flow on without vectors)", registry=r)
        self.query_seconds = Histogram(
            "totalrecall_embedder_query_seconds", "RPC embed latency", ["kind"],
            buckets=_LATENCY_BUCKETS, registry=r)
        self.rpc_requests = Counter(
            "totalrecall_embedder_rpc_requests_total", "RPC embed requests by kind and outcome",
            ["kind", "outcome"], registry=r)
