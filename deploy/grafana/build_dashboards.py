"""Generates the Grafana dashboards in dashboards/ (run: python deploy/grafana/build_dashboards.py).

Kept as code so the panels stay small and consistent; the JSON files are committed output
(tests/unit/deploy checks they are up to date and use only metrics listed in deploy/METRICS.md).
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).parent / "dashboards"


# The provisioned datasource (provisioning/datasources/prometheus.yml), referenced by uid.
DS = {"type": "prometheus", "uid": "prometheus"}


def q(expr: str, legend: str = "") -> dict[str, object]:
    return {"expr": expr, "legendFormat": legend, "datasource": DS}


def p95(metric: str, by: str = "", q_: float = 0.99) -> str:
    group = f"le, {by}" if by else "le"
    return f"histogram_quantile({q_}, sum by ({group}) (rate({metric}_bucket[5m])))"


def panel(title: str, targets: list[dict[str, object]], unit: str = "short", kind: str = "timeseries",
          thresholds: list[float] | None = None) -> dict[str, object]:
    steps = [{"color": "green", "value": None}] + [
        {"color": "red", "value": t} for t in (thresholds or [])]
    return {"type": kind, "title": title, "datasource": DS, "targets": targets,
            "fieldConfig": {"defaults": {"unit": unit,
                                         "thresholds": {"mode": "absolute", "steps": steps}},
                            "overrides": []}}


def dashboard(uid: str, title: str, panels: list[dict[str, object]]) -> dict[str, object]:
    for i, p in enumerate(panels):
        p["id"] = i + 1
        p["gridPos"] = {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)}
    return {"uid": uid, "title": title, "tags": ["totalrecall"], "schemaVersion": 39,
            "time": {"from": "now-6h", "to": "now"}, "refresh": "30s", "panels": panels}


DASHBOARDS = [
    dashboard("tr-pipeline", "Total Recall — pipeline", [
        panel("Events per second by stage", [
            q("sum(rate(totalrecall_recall_ingested_events_total[5m]))", "api ingest"),
            q("sum(rate(totalrecall_watchers_events_published_total[5m]))", "watchers"),
            q("sum(rate(totalrecall_embedder_events_in_total[5m]))", "embedder in"),
            q("sum(rate(totalrecall_embedder_events_out_total[5m]))", "embedder out"),
            q("sum by (outcome) (rate(totalrecall_indexer_events_total[5m]))", "indexer {{outcome}}"),
        ], "ops"),
        panel("Deduplicated and dropped", [
            q("sum(rate(totalrecall_embedder_dedup_dropped_total[5m]))", "embedder dedup"),
            q("sum(rate(totalrecall_recall_ingest_duplicates_total[5m]))", "ingest duplicates"),
            q("sum by (watcher) (rate(totalrecall_watchers_events_suppressed_total[5m]))",
              "rate-limited {{watcher}}"),
            q("sum(rate(totalrecall_embedder_dead_letters_total[5m]))", "embedder dead letters"),
        ], "ops"),
        panel("Consumer lag (pending messages)", [
            q("totalrecall_embedder_consumer_pending", "embedder"),
            q("totalrecall_indexer_consumer_pending", "indexer"),
        ], thresholds=[1000]),
        panel("Dead-letter stream", [q("totalrecall_indexer_dlq_messages", "DLQ")],
              kind="stat", thresholds=[1]),
        panel("Batch sizes (median)", [
            q(p95("totalrecall_embedder_batch_size", q_=0.5), "embedder"),
            q(p95("totalrecall_indexer_batch_size", q_=0.5), "indexer"),
        ]),
        panel("Embedder model state (0 ok, 1 no model, 2 CPU fallback)", [
            q("max(totalrecall_embedder_fallback_state)", "state")], kind="stat", thresholds=[1]),
        panel("Services up", [q('up{job=~"totalrecall-.*"}', "{{job}}")], kind="stat"),
        panel("Event time → searchable", [
            q(p95("totalrecall_indexer_event_to_searchable_seconds", q_=0.5), "p50"),
            q(p95("totalrecall_indexer_event_to_searchable_seconds"), "p99"),
        ], "s"),
    ]),
    dashboard("tr-recall", "Total Recall — recall latency vs budget", [
        panel("Automatic recall p50 / p99 (budget 85 ms)", [
            q(p95("totalrecall_recall_stage_seconds", q_=0.5)
              .replace("_bucket[5m]", '_bucket{stage="total"}[5m]'), "p50"),
            q(p95("totalrecall_recall_stage_seconds").replace("_bucket[5m]", '_bucket{stage="total"}[5m]'),
              "p99"),
        ], "s", thresholds=[0.085]),
        panel("p99 per stage (budgets: embed 50 ms, hot 20 ms, BM25 10 ms, merge 5 ms)", [
            q(p95("totalrecall_recall_stage_seconds", "stage"), "{{stage}}"),
        ], "s", thresholds=[0.05]),
        panel("Query embedding in the embedder", [
            q(p95("totalrecall_embedder_query_seconds", "kind", q_=0.5), "p50 {{kind}}"),
            q(p95("totalrecall_embedder_query_seconds", "kind"), "p99 {{kind}}"),
        ], "s"),
        panel("Vector search per tier (indexer)", [
            q(p95("totalrecall_indexer_search_seconds", "tier"), "p99 {{tier}}"),
        ], "s"),
        panel("Requests by endpoint and status", [
            q("sum by (endpoint, status) (rate(totalrecall_recall_requests_total[5m]))",
              "{{endpoint}} {{status}}"),
        ], "reqps"),
        panel("Degraded recalls (a component missing)", [
            q("sum by (component) (rate(totalrecall_recall_degraded_total[5m]))", "{{component}}"),
        ], "ops"),
    ]),
    dashboard("tr-storage", "Total Recall — tiers and storage", [
        panel("Memories per tier", [q("totalrecall_indexer_docs", "{{tier}}")]),
        panel("HNSW index completeness", [
            q("totalrecall_indexer_index_completeness_ratio", "{{tier}}")], "percentunit"),
        panel("Write latency p99 per store", [
            q(p95("totalrecall_indexer_write_seconds", "store"), "{{store}}")], "s"),
        panel("HNSW build (optimize) time", [
            q("sum by (tier) (rate(totalrecall_indexer_optimize_seconds_sum[1h]))", "{{tier}}")], "s"),
        panel("Free disk for the state directory", [
            q("totalrecall_indexer_state_disk_free_bytes", "free")], "bytes"),
        panel("Promotions between tiers", [
            q("sum by (src, dst) (increase(totalrecall_indexer_compacted_total[1h]))",
              "{{src}} → {{dst}}")]),
    ]),
    dashboard("tr-watchers", "Total Recall — watchers", [
        panel("Watcher state (1 = current)", [
            q("totalrecall_watchers_watcher_state == 1", "{{watcher}}: {{state}}")], kind="table"),
        panel("Events per hour by watcher (budget 50–200/h)", [
            q("sum by (watcher) (rate(totalrecall_watchers_events_emitted_total[1h])) * 3600",
              "{{watcher}}")], thresholds=[200]),
        panel("Rate-limited events", [
            q("sum by (watcher) (rate(totalrecall_watchers_events_suppressed_total[1h])) * 3600",
              "{{watcher}}")]),
        panel("Spool (NATS unreachable)", [
            q("totalrecall_watchers_spool_events", "waiting"),
            q("totalrecall_watchers_nats_connected", "connected")]),
        panel("Poll duration p99", [
            q(p95("totalrecall_watchers_poll_duration_seconds", "watcher"), "{{watcher}}")], "s"),
        panel("Watcher errors", [
            q("sum by (watcher) (rate(totalrecall_watchers_watcher_errors_total[5m]))",
              "{{watcher}}")], "ops"),
    ]),
]


def render() -> dict[str, str]:
    """File name in dashboards/ -> JSON text."""
    return {f"{d['uid']}.json": json.dumps(d, indent=2) + "\n" for d in DASHBOARDS}


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text)
        print(f"wrote {OUT / name}")
