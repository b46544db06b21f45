"""Prometheus metrics of the watchers service, on a per-app registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

WATCHER_STATES = ("starting", "running", "unavailable", "failed", "disabled", "stopped")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        p = "totalrecall_watchers"
        self.events_emitted = Counter(f"{p}_events_emitted_total",
                                      "Events that passed the rate limit", ["watcher", "category"],
                                      registry=r)
        self.events_suppressed = Counter(f"{p}_events_suppressed_total",
                                         "Events dropped by a rate limit or deduplication",
                                         ["watcher", "reason"], registry=r)
        self.events_published = Counter(f"{p}_events_published_total",
                                        "Events acknowledged by JetStream", ["path"], registry=r)
        self.events_spooled = Counter(f"{p}_events_spooled_total",
                                      "Events written to the on-disk spool", registry=r)
        self.spool_dropped = Counter(f"{p}_spool_dropped_total",
                                     "Oldest spooled events dropped because the spool was full",
                                     registry=r)
        self.spool_events = Gauge(f"{p}_spool_events", "Events waiting in the spool", registry=r)
        self.publish_errors = Counter(f"{p}_publish_errors_total",
                                      "JetStream publishes that failed", registry=r)
        self.nats_connected = Gauge(f"{p}_nats_connected", "1 when connected to NATS", registry=r)
        self.poll_seconds = Histogram(f"{p}_poll_duration_seconds", "Time of one watcher poll",
                                      ["watcher"], registry=r,
                                      buckets=(0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 30))
        self.watcher_errors = Counter(f"{p}_watcher_errors_total", "Watcher failures",
                                      ["watcher"], registry=r)
        self.watcher_state = Gauge(f"{p}_watcher_state", "1 for the current state of a watcher",
                                   ["watcher", "state"], registry=r)

        self.watcher_stat = Gauge(f"{p}_watcher_stat",
                                  "Per-watcher counters: deduplicated, coalesced, filtered, …",
                                  ["watcher", "stat"], registry=r)

    def set_state(self, watcher: str, state: str) -> None:
        for s in WATCHER_STATES:
            self.watcher_state.labels(watcher, s).set(1 if s == state else 0)
