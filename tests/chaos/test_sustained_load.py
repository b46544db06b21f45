"""Row: sustained load. Recall at 50 req/s while ingesting 200 events/s for 10 minutes (fast
variant: 20 s at 10 req/s and 50 events/s): p99 within the budget, no growth in memory or lag.

Open loop: every request has a scheduled send time on a fixed-rate grid and its latency is
measured from that time, so a slow answer delays nobody's clock (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import nats
import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from totalrecall_schema import Topology

from bench.machine import describe
from tests.chaos.load_client import (
    DRAIN_TIMEOUT_S,
    QUERIES,
    Pool,
    cpu_seconds,
    drain_s,
    event,
    fixed_rate,
    lag,
    memory_by_service,
    service_pids,
    stolen_seconds,
)
from tests.chaos.report import ROWS, record
from tests.chaos.stack_inputs import Stack, chaos_stack

ROW = next(r for r in ROWS if r.startswith("sustained load:"))
#: architecture.md "Latency budgets": hot tier < 100 ms (the automatic recall on every prompt
#: about 85 ms). Timeframe "auto" on memories of the last minutes searches the hot tier.
P99_BUDGET_MS = 100.0
#: The client's event loop is watched with sleeps this long.
LOOP_TICK_S = 0.05
@dataclass
class Figures:
    recall_ms: list[float] = field(default_factory=list)
    recall_at: list[float] = field(default_factory=list)  # each one's scheduled send, s into the load
    #: Each one's stages as the recall API timed them (its `Server-Timing` header), ms.
    recall_stages: list[dict[str, float]] = field(default_factory=list)
    recall_errors: dict[str, int] = field(default_factory=dict)
    ingest_ms: list[float] = field(default_factory=list)
    ingest_errors: dict[str, int] = field(default_factory=dict)
    events_sent: int = 0
    late_sends: int = 0  # the client itself fell behind its schedule by > 100 ms
    rss_mb: dict[str, list[float]] = field(default_factory=dict)  # PSS, per service
    #: Private anonymous memory per service (`memory_mb`): what the growth check reads.
    anon_mb: dict[str, list[float]] = field(default_factory=dict)
    #: Cores each process used on average during the load (CPU seconds / wall seconds); the load
    #: client itself as "load client".
    cores: dict[str, float] = field(default_factory=dict)
    #: Cores the hypervisor took from this machine during the load (`stolen_seconds`).
    stolen: float = 0.0
    lag: list[tuple[float, int, int]] = field(default_factory=list)  # t, embedder, indexer
    #: The indexer's hot tier during the load: searches, searches that went without the tier
    #: (its HNSW build ran), builds and their seconds (its /metrics, after minus before).
    hot_tier: dict[str, float] = field(default_factory=dict)
    load: list[tuple[float, float]] = field(default_factory=list)  # t, 1-min load average
    #: How late each of the client's `LOOP_TICK_S` sleeps woke up, ms.
    loop_lag_ms: list[float] = field(default_factory=list)
    #: Where a recall's time went: per stage of the recall API, [count, mean, p50, p99] in ms
    #: (from its histogram's buckets during the load: a percentile is its bucket's bound).
    stages: dict[str, list[float]] = field(default_factory=dict)
    started_at: str = ""  # wall clock (UTC), to set the series beside the services' logs


async def _run(stack: Stack, recall_rate: float, events_rate: float, duration: float,
               batch: int) -> Figures:
    figures = Figures()
    ns = f"load-{uuid.uuid4().hex[:8]}"
    rng = random.Random(20261125)
    pids = service_pids(stack)
    nc = await nats.connect(stack.running.nats_url)
    js = nc.jetstream()
    topo = Topology()
    client = Pool(stack.url, stack.headers, size=64)
    try:
        # Something to recall from the first request on.
        for _ in range(10):
            await client.post("/memory/ingest", [event(ns, rng) for _ in range(50)])

        async def recall(scheduled: float) -> None:
            stages: dict[str, float] = {}
            try:
                status, stages = await client.post_timed("/memory/recall", {
                    "query": rng.choice(QUERIES), "namespace": ns, "maxResults": 6,
                    "timeframe": "auto"})
                code = str(status)
            except (OSError, TimeoutError, ValueError, IndexError) as exc:
                code = type(exc).__name__
            if code == "200":
                figures.recall_ms.append((time.monotonic() - scheduled) * 1000)
                figures.recall_at.append(scheduled - t0)
                figures.recall_stages.append(stages)
            else:
                figures.recall_errors[code] = figures.recall_errors.get(code, 0) + 1

        async def ingest(scheduled: float) -> None:
            body = [event(ns, rng) for _ in range(batch)]
            try:
                code = str(await client.post("/memory/ingest", body))
            except (OSError, TimeoutError, ValueError, IndexError) as exc:
                code = type(exc).__name__
            if code == "200":
                figures.ingest_ms.append((time.monotonic() - scheduled) * 1000)
                figures.events_sent += batch
            else:
                figures.ingest_errors[code] = figures.ingest_errors.get(code, 0) + 1

        async def sample(stop: asyncio.Event, t0: float) -> None:
            while not stop.is_set():
                t = round(time.monotonic() - t0, 1)
                # Off the event loop: reading every process's memory from /proc is slow, the
                # more so on a saturated machine, and the loop would answer no recall meanwhile
                # (their latencies counted it, every sample).
                pss, private = await asyncio.to_thread(memory_by_service, pids)
                for name, mb in pss.items():
                    figures.rss_mb.setdefault(name, []).append(round(mb, 1))
                for name, mb in private.items():
                    figures.anon_mb.setdefault(name, []).append(round(mb, 1))
                figures.lag.append((t, *await lag(js, topo)))
                figures.load.append((t, os.getloadavg()[0]))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=max(duration / 30, 1.0))

        async def watch_loop(stop: asyncio.Event) -> None:
            """How late the client's own event loop wakes up: a recall's latency includes it."""
            while not stop.is_set():
                start = time.monotonic()
                await asyncio.sleep(LOOP_TICK_S)
                figures.loop_lag_ms.append((time.monotonic() - start - LOOP_TICK_S) * 1000)

        cpu0, client0 = cpu_seconds(pids), sum(psutil.Process().cpu_times()[:2])
        stolen0 = stolen_seconds()
        hot0, stages0 = _hot_tier(stack), _stage_buckets(stack)
        figures.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        t0 = time.monotonic() + 0.5
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample(stop, t0))
        watcher = asyncio.create_task(watch_loop(stop))
        lates = await asyncio.gather(fixed_rate(recall_rate, duration, t0, recall),
                                     fixed_rate(events_rate / batch, duration, t0, ingest))
        figures.late_sends += sum(lates)
        stop.set()
        await sampler
        await watcher
        wall = time.monotonic() - t0
        cpu1 = cpu_seconds(pids)
        figures.stolen = round((stolen_seconds() - stolen0) / wall, 2)
        figures.cores = {name: round((cpu1[name] - cpu0[name]) / wall, 2) for name in cpu0}
        figures.cores["load client"] = round(
            (sum(psutil.Process().cpu_times()[:2]) - client0) / wall, 2)
        hot1 = _hot_tier(stack)
        figures.hot_tier = {k: round(hot1[k] - hot0.get(k, 0.0), 1) for k in hot1}
        figures.stages = _stage_summary(stages0, _stage_buckets(stack))
    finally:
        await client.close()
    await nc.drain()
    return figures


#: The indexer's samples (with the label tier="hot") the row reports, by the name it gives them.
_HOT_METRICS = {
    "searches": "totalrecall_indexer_search_seconds_count",
    "searches_without_the_tier": "totalrecall_indexer_search_skipped_total",
    "builds": "totalrecall_indexer_optimize_seconds_count",
    "build_seconds": "totalrecall_indexer_optimize_seconds_sum",
}


def _samples(url: str, headers: dict[str, str] | None = None) -> list[Sample] | None:
    """Every sample a service's /metrics exports (None if it cannot be read)."""
    try:
        text = httpx.get(url, headers=headers, timeout=5).text
    except httpx.HTTPError:
        return None
    return [sample for family in text_string_to_metric_families(text)
            for sample in family.samples]


def _hot_tier(stack: Stack) -> dict[str, float]:
    """The indexer's hot-tier counters, from its /metrics (0 for one not exported yet)."""
    samples = _samples(f"http://127.0.0.1:{stack.running.ports['indexer']}/metrics")
    if samples is None:
        return {}
    hot = {s.name: s.value for s in samples if s.labels.get("tier") == "hot"}
    return {name: float(hot.get(metric, 0.0)) for name, metric in _HOT_METRICS.items()}


#: stage -> (sum of seconds, [(bucket bound in seconds, cumulative count)])
_Buckets = dict[str, tuple[float, list[tuple[float, float]]]]


def _stage_buckets(stack: Stack) -> _Buckets:
    """The recall API's per-stage latency histogram, from its /metrics (empty if unreachable)."""
    out: _Buckets = {}
    for sample in _samples(f"{stack.url}/metrics", stack.headers) or []:
        stage = sample.labels.get("stage", "")
        if sample.name == "totalrecall_recall_stage_seconds_sum":
            out[stage] = (sample.value, out.get(stage, (0.0, []))[1])
        elif sample.name == "totalrecall_recall_stage_seconds_bucket":
            out.setdefault(stage, (0.0, []))[1].append((float(sample.labels["le"]),
                                                        sample.value))
    return out


def _stage_summary(before: _Buckets, after: _Buckets) -> dict[str, list[float]]:
    """Per stage, what was observed between the two scrapes: [count, mean, p50, p99] in ms."""
    out: dict[str, list[float]] = {}
    for stage, (total, buckets) in sorted(after.items()):
        total0, buckets0 = before.get(stage, (0.0, []))
        earlier = dict(buckets0)
        cumulative = sorted((le, n - earlier.get(le, 0.0)) for le, n in buckets)
        count = cumulative[-1][1] if cumulative else 0.0
        if count <= 0:
            continue
        p50, p99 = (next(le for le, n in cumulative if n >= q * count) for q in (0.5, 0.99))
        out[stage] = [count, round((total - total0) / count * 1000, 2),
                      round(p50 * 1000, 1), round(p99 * 1000, 1)]
    return out


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _windows(at: list[float], ms: list[float], width: float) -> list[list[float]]:
    """Latency over time: per `width` seconds of scheduled sends, [start s, recalls, p50,
    p99, max ms] (where in the load the tail came from: a build, a refresh, a vacuum)."""
    buckets: dict[int, list[float]] = {}
    for t, v in zip(at, ms, strict=True):
        buckets.setdefault(int(t // width), []).append(v)
    return [[k * width, len(v), round(_pct(v, 0.5)), round(_pct(v, 0.99)), round(max(v))]
            for k, v in sorted(buckets.items())]


def _where_time_went(ms: list[float], stages: list[dict[str, float]], budget: float
                     ) -> dict[str, dict[str, float]]:
    """Mean ms per stage (the recall API's `Server-Timing`) of every recall and of those over
    the budget; "outside" is what the service did not time: its HTTP layer, the network and
    the client."""
    def means(picked: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
        if not picked:
            return {}
        names = sorted({name for _, st in picked for name in st})
        out = {name: round(statistics.fmean(st.get(name, 0.0) for _, st in picked), 1)
               for name in names}
        out["outside"] = round(statistics.fmean(
            t - st.get("total", 0.0) - st.get("queue", 0.0) for t, st in picked), 1)
        return {"recalls": float(len(picked)), "latency": round(statistics.fmean(
            t for t, _ in picked), 1), **out}

    timed = [(t, st) for t, st in zip(ms, stages, strict=True) if st]
    return {"all": means(timed), "over the budget": means([p for p in timed if p[0] > budget])}


def _middle_and_last(series: list[float]) -> tuple[list[float], list[float]]:
    """The middle third of a run's samples and the last (with the remainder)."""
    third = len(series) // 3
    return series[third:2 * third], series[2 * third:]


def _grows(series: list[float], slack: float, share: float = 0.10,
           level: Callable[[list[float]], float] = statistics.fmean) -> bool:
    """A trend after warm-up: the last third's `level` over the middle third's by more than
    `share` plus `slack` (absolute)."""
    if len(series) < 6:
        return False
    middle, last = _middle_and_last(series)
    return level(last) > level(middle) * (1 + share) + slack


def _memory_grows(series: list[float]) -> bool:
    """A leak raises the floor a process comes back to; an HNSW build raises the indexer's
    memory for its few seconds and gives it back, so a sample that falls inside one is no
    trend: the lowest sample of each third is compared."""
    return _grows(series, slack=30.0, level=min)


def _check(tmp_path: Path, recall_rate: float, events_rate: float, duration: float,
           batch: int) -> tuple[bool, dict[str, object], list[str]]:
    with chaos_stack(tmp_path / "home") as stack:
        restarts_before = stack.supervisor_restarts()
        figures = asyncio.run(_run(stack, recall_rate, events_rate, duration, batch))
        drain = drain_s(stack)
        restarts = stack.supervisor_restarts() - restarts_before
    p50, p99 = _pct(figures.recall_ms, 0.50), _pct(figures.recall_ms, 0.99)
    emb_lag = [float(e) for _, e, _ in figures.lag]
    idx_lag = [float(i) for _, _, i in figures.lag]
    # Lag slack: two seconds of ingest (batches arrive in bursts).
    lag_slack = 2 * events_rate
    growing = {name: _memory_grows(series) for name, series in figures.anon_mb.items()}
    failures: list[str] = []
    if p99 > P99_BUDGET_MS:
        failures.append(f"recall p99 {p99:.0f} ms over the {P99_BUDGET_MS:.0f} ms budget")
    if figures.recall_errors or figures.ingest_errors:
        failures.append(f"errors: recall {figures.recall_errors}, ingest {figures.ingest_errors}")
    if any(growing.values()):
        failures.append("private memory grows: "
                        f"{[n for n, g in growing.items() if g]}")
    if _grows(emb_lag, lag_slack) or _grows(idx_lag, lag_slack):
        failures.append("consumer lag grows")
    if restarts:
        failures.append(f"{restarts} service restarts")
    if drain is None:
        failures.append(f"backlog not drained {DRAIN_TIMEOUT_S:.0f} s after the load")
    loads = [load for _, load in figures.load]
    out: dict[str, object] = {
        "duration_s": duration, "recall_rate_per_s": recall_rate,
        "events_rate_per_s": events_rate, "ingest_batch": batch,
        "recalls_ok": len(figures.recall_ms), "recall_p50_ms": round(p50, 1),
        "recall_p90_ms": round(_pct(figures.recall_ms, 0.90), 1), "recall_p99_ms": round(p99, 1),
        "recall_max_ms": round(max(figures.recall_ms, default=float("nan")), 1),
        "p99_budget_ms": P99_BUDGET_MS, "recall_errors": figures.recall_errors,
        "events_ingested": figures.events_sent, "ingest_errors": figures.ingest_errors,
        "ingest_p99_ms": round(_pct(figures.ingest_ms, 0.99), 1),
        "client_late_sends": figures.late_sends,
        "client_loop_lag_p99_max_ms": [round(_pct(figures.loop_lag_ms, 0.99), 1),
                                       round(max(figures.loop_lag_ms, default=0.0), 1)],
        "pss_mb_start_middle_end": {n: [s[0], s[len(s) // 2], s[-1]]
                                    for n, s in figures.rss_mb.items() if s},
        "private_mb_start_middle_end": {n: [s[0], s[len(s) // 2], s[-1]]
                                        for n, s in figures.anon_mb.items() if s},
        "private_mb_floor_middle_last_third": {
            n: [min(part) for part in _middle_and_last(s)]
            for n, s in figures.anon_mb.items() if len(s) >= 6},
        "lag_embedder_max": max(emb_lag, default=0), "lag_indexer_max": max(idx_lag, default=0),
        "lag_embedder_start_middle_end": [emb_lag[0], emb_lag[len(emb_lag) // 2], emb_lag[-1]]
        if emb_lag else [],
        "lag_indexer_start_middle_end": [idx_lag[0], idx_lag[len(idx_lag) // 2], idx_lag[-1]]
        if idx_lag else [],
        "drain_after_load_s": round(drain, 1) if drain is not None else
        f"not drained in {DRAIN_TIMEOUT_S:.0f} s", "service_restarts": restarts,
        "loadavg_1m_min_mean_max": [round(min(loads), 2), round(statistics.fmean(loads), 2),
                                    round(max(loads), 2)] if loads else [],
        "hot_tier_during_load": figures.hot_tier,
        "recall_stages_n_mean_p50_p99_ms": figures.stages,
        "recall_stage_means_ms_all_and_over_budget": _where_time_went(
            figures.recall_ms, figures.recall_stages, P99_BUDGET_MS),
        "started_at_utc": figures.started_at,
        "recall_by_window_s_n_p50_p99_max_ms": _windows(figures.recall_at, figures.recall_ms,
                                                        max(duration / 60, 1.0)),
        "cores_used_by_process": figures.cores,
        "cores_used_total": round(sum(figures.cores.values()), 2),
        "cores_stolen_by_host": figures.stolen,
        "cpus": os.cpu_count(),
        "machine": describe(),
    }
    return not failures, out, failures


@pytest.mark.chaos
@pytest.mark.timeout(1800)
def test_sustained_load(tmp_path: Path) -> None:
    holds, figures, failures = _check(tmp_path, 50, 200, 600, 10)
    record(ROW, holds, figures, "; ".join(failures))
    assert holds, failures


@pytest.mark.fast
def test_sustained_load_fast(tmp_path: Path) -> None:
    """20 s at 10 recalls/s and 50 events/s: no errors, everything ingested is indexed, no
    restarts, no pathological latency (p99 under 2 s: this 2-core machine is shared, its load
    average was 15 while this was written; the full row holds the budget itself)."""
    holds, figures, failures = _check(tmp_path, 10, 50, 20, 10)
    record(ROW, holds, figures, "; ".join(failures))
    shown = json.dumps(figures, default=str)
    assert not figures["recall_errors"] and not figures["ingest_errors"], shown
    assert figures["service_restarts"] == 0, shown
    assert float(figures["recall_p99_ms"]) < 20 * P99_BUDGET_MS, shown  # type: ignore[arg-type]
