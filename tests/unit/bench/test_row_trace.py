"""The row trace's summaries (`bench/row_trace.py`): builds read from the indexer's log, recalls
placed relative to them, and the report, on made-up traces."""

from __future__ import annotations

from datetime import UTC, datetime

from bench.row_trace import Trace, around_ends, builds, percentile, report, slow_share

T0 = datetime(2026, 11, 28, 0, 0, 0, tzinfo=UTC).timestamp()

LOG = """\
2026-11-28 00:00:09,000 INFO totalrecall.indexer building the HNSW of hot (80000 docs, 90% indexed)
2026-11-28 00:00:10,500 INFO totalrecall.indexer HNSW built: {'hot': 1.5}
INFO:     127.0.0.1:43876 - "GET /health HTTP/1.1" 200 OK
2026-11-28 00:00:40,000 INFO totalrecall.indexer building the HNSW of hot (86000 docs, 93% indexed)
2026-11-28 00:00:43,000 INFO totalrecall.indexer HNSW built: {'hot': 3.0}
2026-11-28 00:01:13,000 INFO totalrecall.indexer building the HNSW of hot (92000 docs, 93% indexed)
"""


def test_builds_are_read_from_the_log_relative_to_the_load() -> None:
    # the last build never ended: not a span
    assert builds(LOG, T0) == [(9.0, 10.5), (40.0, 43.0)]
    assert builds(LOG, T0 + 10) == [(-1.0, 0.5), (30.0, 33.0)]


def test_percentile_is_the_nearest_rank() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
    assert percentile([float(i) for i in range(100)], 0.99) == 99.0


def test_recalls_are_binned_by_their_time_from_a_build_end() -> None:
    recalls = [(9.5, 10.0), (10.6, 300.0), (10.9, 100.0), (12.0, 20.0), (30.0, 15.0)]
    rows = around_ends(recalls, [10.5], before_s=2.0, after_s=3.0, bin_s=1.0)
    assert rows == [(-1.0, 1, 10.0, 10.0), (0.0, 2, 300.0, 300.0), (1.0, 1, 20.0, 20.0)]


def test_slow_recalls_are_counted_by_where_they_fall() -> None:
    spans = [(9.0, 10.5)]
    recalls = [(9.5, 150.0), (10.0, 20.0),          # building
               (11.0, 250.0), (13.4, 30.0),         # the 3 s after it
               (14.0, 120.0), (20.0, 10.0), (1.0, 10.0)]
    assert slow_share(recalls, spans, after_s=3.0, budget_ms=100.0) == {
        "building": (1, 2), "after a build": (1, 2), "the rest": (1, 3)}


def test_the_report_names_the_figures() -> None:
    trace = Trace(recalls=[(float(t) / 10, 20.0 if t % 10 else 180.0) for t in range(600)],
                  cpu=[(0.0, {"postgres": 1.0, "totalrecall_indexer": 2.0}),
                       (60.0, {"postgres": 31.0, "totalrecall_indexer": 26.0})],
                  stolen=[100.0, 106.0], t0_wall=T0)
    text = "\n".join(report(trace, LOG))
    assert "recalls 600 (failed 0; event posts failed 0): p50 / p90 / p99 20 / 180 / 180 ms" in text
    assert '"postgres": 0.5' in text and '"totalrecall_indexer": 0.4' in text
    assert "cores stolen by the host: 0.10" in text
    assert "builds 2: 9-10 s, 40-43 s" in text
    assert "over 100 ms, after a build: 6 of 60 (10.0 %)" in text
