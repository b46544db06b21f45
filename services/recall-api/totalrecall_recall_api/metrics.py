from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from .recall import stage_times

# Buckets around the design's budgets (query embedding 50 ms, hot search 20 ms, BM25 10 ms,
# merge 5 ms, total 85 ms) with resolution below them.
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.085,
            0.1, 0.15, 0.25, 0.5, 1.0, 2.0, 5.0)


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.stage_seconds = Histogram(
            "totalrecall_recall_stage_seconds", "Latency of each recall stage", ["stage"],
            buckets=_BUCKETS, registry=r)
        self.requests = Counter("totalrecall_recall_requests_total", "HTTP requests",
                                ["endpoint", "status"], registry=r)
        self.ingested = Counter("totalrecall_recall_ingested_events_total",
                                "Events accepted by ingest/store/flush", ["category"], registry=r)
        self.ingest_duplicates = Counter("totalrecall_recall_ingest_duplicates_total",
                                         "Ingested events JetStream already had", registry=r)
        self.conclusions = Counter("totalrecall_recall_conclusions_total",
                                   "Memories derived from conversation turns, per rule "
                                   "(core/conclusions.py)", ["rule"], registry=r)
        self.conclusion_errors = Counter("totalrecall_recall_conclusion_errors_total",
                                         "Turns whose conclusions could not be extracted (the "
                                         "turn is stored without them)", registry=r)
        self.recalls_shed = Counter("totalrecall_recall_shed_total",
                                    "Recalls refused (503) for want of a slot in time", registry=r)
        self.recalls_in_flight = Gauge("totalrecall_recall_in_flight",
                                       "Recalls holding a slot (admission control)", registry=r)
        self.degraded = Counter("totalrecall_recall_degraded_total",
                                "Recalls served without a component", ["component"], registry=r)
        self.results = Histogram("totalrecall_recall_results_count", "Memories returned per recall",
                                 buckets=(0, 1, 2, 3, 4, 6, 8, 10, 20, 50), registry=r)
        self.alerts_open = Gauge("totalrecall_recall_alerts_open",
                                 "Open proactive alerts in the namespaces examined, per rule",
                                 ["rule"], registry=r)
        self.alerts_seconds = Histogram("totalrecall_recall_alerts_check_seconds",
                                        "Time to examine one namespace's events for alerts",
                                        buckets=_BUCKETS, registry=r)
        self.query_spread = Counter(
            "totalrecall_recall_query_spread_total",
            "Long prompts embedded here (the query model) by whether they were spread over "
            "QUERY_PARALLEL_THREADS (spread) or kept on one because something else ran (busy)",
            ["outcome"], registry=r)

    def spread_hook(self, spread: bool) -> None:
        self.query_spread.labels("spread" if spread else "busy").inc()

    def stage(self, name: str, seconds: float) -> None:
        """One recall stage took `seconds`: into its histogram and the request's own tally
        (`stage_times`)."""
        self.stage_seconds.labels(name).observe(seconds)
        stage_times.add(name, seconds)
