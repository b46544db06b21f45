"""Prometheus metrics of the indexer, on a per-app registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_E2E_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.docs = Gauge("totalrecall_indexer_docs", "Docs per Zvec tier", ["tier"], registry=r)
        self.expired = Counter(
            "totalrecall_indexer_expired_total",
            "Memories dropped from the indexes by cold-tier retention (kept in the Markdown)",
            registry=r)
        self.pg_rows = Gauge("totalrecall_indexer_pg_rows", "Rows in Postgres memories",
                             registry=r)
        self.index_completeness = Gauge(
            "totalrecall_indexer_index_completeness_ratio",
            "Fraction of a tier's docs inside the HNSW graph", ["tier"], registry=r)
        self.write_seconds = Histogram(
            "totalrecall_indexer_write_seconds", "Write latency per store and batch",
            ["store"], buckets=_LATENCY_BUCKETS, registry=r)
        self.searchable_seconds = Histogram(
            "totalrecall_indexer_event_to_searchable_seconds",
            "Event timestamp to searchable in the indexer", buckets=_E2E_BUCKETS, registry=r)
        self.optimize_seconds = Histogram(
            "totalrecall_indexer_optimize_seconds", "HNSW build (optimize) duration", ["tier"],
            buckets=(0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800), registry=r)
        self.batch_size = Histogram(
            "totalrecall_indexer_batch_size", "Messages per consumed batch",
            buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000), registry=r)
        self.events = Counter("totalrecall_indexer_events_total", "Events by outcome",
                              ["outcome"], registry=r)
        self.search_skipped = Counter(
            "totalrecall_indexer_search_skipped_total",
            "Tier searches answered without the tier: its HNSW build ran, or it stayed busy "
            "past the search's wait",
            ["tier"], registry=r)
        self.search_seconds = Histogram(
            "totalrecall_indexer_search_seconds", "Vector search latency per tier", ["tier"],
            buckets=_LATENCY_BUCKETS, registry=r)
        self.compacted = Counter("totalrecall_indexer_compacted_total", "Docs moved between tiers",
                                 ["src", "dst"], registry=r)
        # Refreshed periodically (`Indexer.refresh_runtime_gauges`); the alert rules use them.
        self.consumer_pending = Gauge(
            "totalrecall_indexer_consumer_pending",
            "Messages of the embedded stream the durable indexer consumer has not acked yet "
            "(num_pending + num_ack_pending)", registry=r)
        self.dlq_messages = Gauge("totalrecall_indexer_dlq_messages",
                                  "Messages in the dead-letter stream", registry=r)
        self.state_disk_free = Gauge("totalrecall_indexer_state_disk_free_bytes",
                                     "Free bytes on the file system of $TOTALRECALL_HOME",
                                     registry=r)
        self.markdown_repairs = Counter(
            "totalrecall_indexer_markdown_repairs_total",
            "Torn daily-log tails repaired after a crash mid-append", registry=r)
        self.build_repairs = Counter(
            "totalrecall_indexer_build_repairs_total",
            "HNSW builds completed to lift a tier's write hold (its previous build was "
            "interrupted by a crash, or a Zvec write failed)", ["tier"], registry=r)
        self.quarantined = Counter(
            "totalrecall_indexer_zvec_quarantined_total",
            "Zvec collections found unopenable at start (half-created by a kill, damaged "
            "segment), moved aside and started empty; re-indexed from Postgres", ["tier"],
            registry=r)
        self.reindexed = Counter(
            "totalrecall_indexer_reindexed_total",
            "Memories Postgres has and a Zvec tier lacked, re-embedded and re-indexed (the tier was "
            "quarantined, or checked after an interrupted HNSW build or a failed write)",
            ["tier"], registry=r)
        # The consistency check of Zvec against Postgres (`core/reconcile.py`).
        self.reconcile_runs = Counter(
            "totalrecall_indexer_reconcile_runs_total",
            "Checks of Zvec against Postgres, by outcome (consistent, repaired, skipped)",
            ["outcome"], registry=r)
        self.reconcile_missing = Counter(
            "totalrecall_indexer_reconcile_missing_total",
            "Memories Postgres has that no Zvec tier held, found by the consistency check "
            "(then re-embedded: reindexed_total)", ["tier"], registry=r)
        self.reconcile_removed = Counter(
            "totalrecall_indexer_reconcile_removed_total",
            "Zvec documents removed by the consistency check: a second copy of a memory "
            "(duplicate) or a key Postgres does not hold (stray)", ["tier", "why"], registry=r)
        self.reconcile_difference = Gauge(
            "totalrecall_indexer_reconcile_difference",
            "Zvec documents minus Postgres memories of the tier at the last check (before its "
            "repair)", ["tier"], registry=r)
        self.reconcile_last = Gauge(
            "totalrecall_indexer_reconcile_last_run_timestamp_seconds",
            "When the last consistency check of Zvec against Postgres ran to its end",
            registry=r)
        self.memory_md_entries = Gauge("totalrecall_indexer_memory_md_entries",
                                       "Memories indexed from MEMORY.md", registry=r)

    def set_tier_stats(self, stats: dict[str, dict[str, float]]) -> None:
        for tier, st in stats.items():
            self.docs.labels(tier=tier).set(st["doc_count"])
            self.index_completeness.labels(tier=tier).set(st["index_completeness"])
