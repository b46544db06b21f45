"""Row: sustained load. Recall at 50 req/s while ingesting 200 events/s for 10 minutes, once with
the query-embedding caches on (as shipped) and once with both off (every question embedded);
the questions are 600 distinct ones (`load_client.questions`), asked in turn. Fast variant (in
`make test`): 30 s at 10 recalls/s and 50 events/s, caches off, 300 distinct questions.

The design's latency budgets, which the full row asserts (copied from the design's automatic
recall path, the one every prompt takes): "Local nomic model embeds the query (50ms), Zvec Hot
tier search (20ms), FTS5 BM25 search (10ms), Hybrid merge + rerank (5ms) ... Total latency added:
~85ms"; and the tiers: hot < 100 ms, warm < 500 ms, cold < 2 s. So: a whole recall's p99, as the
client sees it, within 85 ms; and each stage's mean (the recall API's own histogram) within its
share. The fast variant asserts behaviour only (no errors, no restarts, no growth in memory or
consumer lag, the backlog drained, p99 under a loose 2 s per unit of load average per CPU,
recalls queued rather than shed): a 2-core machine shared with other work misses latency
budgets for reasons of its own, and `make test` must not flip on that; every run records the
1-minute load average beside its latencies.

The caches' hit or miss shows in each recall's `embed` stage (`Server-Timing`): a vector taken
from a cache costs microseconds, one computed milliseconds.

Open loop: every request has a scheduled send time on a fixed-rate grid and its latency is
measured from that time, so a slow answer delays nobody's clock (no coordinated omission).

The caches turned off: the recall API's vectors of recent questions
(``TR_RECALL_QUERY_VECTOR_CACHE_SIZE=0``) and the embedder's in-memory LRU of query vectors
(``TR_EMBEDDER_QUERY_CACHE_ENTRIES=0``, used when the recall API asks the embedder rather than
embedding the question itself); with them off, 95 % of recalls at least must compute their
question's vector and the embedder's query cache must hit nothing.
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
    Pool,
    cpu_seconds,
    drain_s,
    event,
    fixed_rate,
    lag,
    memory_by_service,
    questions,
    service_pids,
    stolen_seconds,
)
from tests.chaos.report import ROWS, record
from tests.chaos.stack_inputs import Stack, chaos_stack

ROW_CACHED = next(r for r in ROWS if r.startswith("sustained load, query-embedding caches on"))
ROW_UNCACHED = next(r for r in ROWS if r.startswith("sustained load, query-embedding caches off"))
#: The design's automatic recall (every prompt): ~85 ms in all, by stage (stage names are the
#: recall API's `totalrecall_recall_stage_seconds` labels; "merge and rerank" is fusion + MMR).
P99_BUDGET_MS = 85.0
STAGE_BUDGETS_MS: dict[str, tuple[tuple[str, ...], float]] = {
    "query embedding": (("embed",), 50.0), "hot-tier vector search": (("vector_hot",), 20.0),
    "BM25": (("bm25",), 10.0), "merge and rerank": (("fusion", "mmr"), 5.0)}
#: The fast variant's bound: pathological only, 2 s per unit of the machine's oversubscription
#: (the 1-minute load average over the CPUs, at least 1) during the load. Its machine is 2 cores
#: shared with other work: at a load average of 23, recall p99 was 11.6 s, every recall answered.
FAST_P99_BOUND_MS = 2000.0
#: The fast variant lets a recall wait for a slot this long instead of shedding it after 2 s
#: (HTTP 503, `recall/admission.py`): on an overloaded shared machine, shedding is the designed answer,
#: but the fast variant checks that every recall is answered.
FAST_QUEUE_WAIT = {"TR_RECALL_RECALL_QUEUE_WAIT_S": "25"}
#: A recall whose `embed` stage took this long or more computed its question's vector (a
#: cached one takes microseconds): with the caches off, nearly all must.
EMBEDDED_MS = 0.5
#: Settings that turn both query-embedding caches off.
NO_QUERY_CACHES = {"TR_RECALL_QUERY_VECTOR_CACHE_SIZE": "0",
                   "TR_EMBEDDER_QUERY_CACHE_ENTRIES": "0"}
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
    #: Distinct questions asked, and the embedder's query-vector lookups during the load
    #: (hit, miss: its /metrics, after minus before).
    distinct_questions: int = 0
    embedder_query_cache: dict[str, float] = field(default_factory=dict)


async def _run(stack: Stack, recall_rate: float, events_rate: float, duration: float,
               batch: int, asked: list[str]) -> Figures:
    figures = Figures()
    turn = iter(range(10**9))  # the i-th recall asks asked[i % len(asked)]
    figures.distinct_questions = len(set(asked[:int(recall_rate * duration)]))
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
                    "query": asked[next(turn) % len(asked)], "namespace": ns, "maxResults": 6,
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
        cache0 = _embedder_query_cache(stack)
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
        cache1 = _embedder_query_cache(stack)
        figures.embedder_query_cache = {k: cache1[k] - cache0.get(k, 0.0) for k in cache1}
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


def _embedder_query_cache(stack: Stack) -> dict[str, float]:
    """The embedder's query-vector lookups so far: {"hit": n, "miss": n} (its /metrics)."""
    samples = _samples(f"http://127.0.0.1:{stack.running.ports['embedder']}/metrics") or []
    out = {"hit": 0.0, "miss": 0.0}
    for s in samples:
        if s.name == "totalrecall_embedder_cache_requests_total" and \
                s.labels.get("cache") == "query":
            out[s.labels.get("result", "")] = s.value
    return out


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


def _stage_means(stages: dict[str, list[float]]) -> dict[str, float]:
    """Each budgeted stage's mean ms during the load (`STAGE_BUDGETS_MS`; stages summed)."""
    return {name: round(sum(stages[n][1] for n in parts if n in stages), 2)
            for name, (parts, _) in STAGE_BUDGETS_MS.items()}


def _check(tmp_path: Path, recall_rate: float, events_rate: float, duration: float,
           batch: int, *, caches: bool, distinct: int, extra_env: dict[str, str] | None = None
           ) -> tuple[dict[str, object], list[str], list[str]]:
    """One load on a fresh stack: (figures, behaviour failures, budget failures)."""
    env = {**({} if caches else NO_QUERY_CACHES), **(extra_env or {})}
    with chaos_stack(tmp_path / "home", extra_env=env) as stack:
        restarts_before = stack.supervisor_restarts()
        figures = asyncio.run(_run(stack, recall_rate, events_rate, duration, batch,
                                   questions(distinct)))
        drain = drain_s(stack)
        restarts = stack.supervisor_restarts() - restarts_before
    p50, p99 = _pct(figures.recall_ms, 0.50), _pct(figures.recall_ms, 0.99)
    emb_lag = [float(e) for _, e, _ in figures.lag]
    idx_lag = [float(i) for _, _, i in figures.lag]
    # Lag slack: two seconds of ingest (batches arrive in bursts).
    lag_slack = 2 * events_rate
    growing = {name: _memory_grows(series) for name, series in figures.anon_mb.items()}
    means = _stage_means(figures.stages)
    behaviour: list[str] = []
    if figures.recall_errors or figures.ingest_errors:
        behaviour.append(f"errors: recall {figures.recall_errors}, ingest {figures.ingest_errors}")
    if len(figures.recall_ms) < int(recall_rate * duration):
        behaviour.append(f"{len(figures.recall_ms)} of {int(recall_rate * duration)} recalls "
                         "answered")
    if any(growing.values()):
        behaviour.append(f"private memory grows: {[n for n, g in growing.items() if g]}")
    if _grows(emb_lag, lag_slack) or _grows(idx_lag, lag_slack):
        behaviour.append("consumer lag grows")
    if restarts:
        behaviour.append(f"{restarts} service restarts")
    if drain is None:
        behaviour.append(f"backlog not drained {DRAIN_TIMEOUT_S:.0f} s after the load")
    if figures.distinct_questions < min(distinct, int(recall_rate * duration)):
        behaviour.append(f"only {figures.distinct_questions} distinct questions asked")
    embedded = sum(1 for st in figures.recall_stages if st.get("embed", 0.0) >= EMBEDDED_MS)
    if not caches and embedded < 0.95 * len(figures.recall_stages):
        behaviour.append(f"only {embedded} of {len(figures.recall_stages)} recalls computed "
                         "their question's vector: a cache answered the rest")
    if not caches and figures.embedder_query_cache.get("hit", 0.0) > 0:
        behaviour.append(f"the embedder's query cache answered "
                         f"{figures.embedder_query_cache['hit']:.0f} lookups: it was not off")
    budget: list[str] = []
    if not p99 <= P99_BUDGET_MS:
        budget.append(f"recall p99 {p99:.0f} ms over the design's {P99_BUDGET_MS:.0f} ms")
    for name, (_, limit) in STAGE_BUDGETS_MS.items():
        if means[name] > limit:
            budget.append(f"{name} mean {means[name]} ms over its {limit:.0f} ms")
    loads = [load for _, load in figures.load]
    out: dict[str, object] = {
        "duration_s": duration, "recall_rate_per_s": recall_rate,
        "events_rate_per_s": events_rate, "ingest_batch": batch,
        "query_embedding_caches": "on" if caches else "off (" + ", ".join(
            f"{k}={v}" for k, v in NO_QUERY_CACHES.items()) + ")",
        "settings": env,
        "recalls_that_embedded_their_question": embedded,
        "distinct_questions": figures.distinct_questions,
        "embedder_query_lookups_hit_miss": [figures.embedder_query_cache.get("hit", 0.0),
                                            figures.embedder_query_cache.get("miss", 0.0)],
        "recalls_ok": len(figures.recall_ms), "recall_p50_ms": round(p50, 1),
        "recall_p90_ms": round(_pct(figures.recall_ms, 0.90), 1), "recall_p99_ms": round(p99, 1),
        "recall_max_ms": round(max(figures.recall_ms, default=float("nan")), 1),
        "p99_budget_ms": P99_BUDGET_MS,
        "stage_means_ms_and_budgets": {name: [means[name], limit] for name, (_, limit)
                                       in STAGE_BUDGETS_MS.items()},
        "recall_errors": figures.recall_errors,
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
        "private_memory_grows": sorted(n for n, g in growing.items() if g),
        "lag_embedder_max": max(emb_lag, default=0), "lag_indexer_max": max(idx_lag, default=0),
        "lag_embedder_start_middle_end": [emb_lag[0], emb_lag[len(emb_lag) // 2], emb_lag[-1]]
        if emb_lag else [],
        "lag_indexer_start_middle_end": [idx_lag[0], idx_lag[len(idx_lag) // 2], idx_lag[-1]]
        if idx_lag else [],
        "consumer_lag_grows": _grows(emb_lag, lag_slack) or _grows(idx_lag, lag_slack),
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
    return out, behaviour, budget


@pytest.mark.chaos
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("caches", [True, False], ids=["caches-on", "caches-off"])
def test_sustained_load(tmp_path: Path, caches: bool) -> None:
    """The design's budgets, and the behaviour, over 10 minutes."""
    figures, behaviour, budget = _check(tmp_path, 50, 200, 600, 10, caches=caches,
                                        distinct=600)
    failures = behaviour + budget
    load = figures["loadavg_1m_min_mean_max"]
    record(ROW_CACHED if caches else ROW_UNCACHED, not failures, figures,
           "; ".join(failures) + (f" (1-min load average min/mean/max {load})"
                                  if failures else ""))
    assert not failures, failures


@pytest.mark.fast
@pytest.mark.timeout(900)
def test_sustained_load_fast(tmp_path: Path) -> None:
    """30 s at 10 recalls/s (300 distinct questions, caches off) and 50 events/s: every
    behaviour check of the full row (no errors, every recall answered, no growth in memory or
    consumer lag, no restarts, the backlog drained, the caches really off) and p99 under a loose
    `FAST_P99_BOUND_MS`; the design's budgets are recorded, asserted by the full row only."""
    figures, behaviour, budget = _check(tmp_path, 10, 50, 30, 10, caches=False, distinct=300,
                                        extra_env=FAST_QUEUE_WAIT)
    p99 = float(figures["recall_p99_ms"])  # type: ignore[arg-type]
    loads = figures["loadavg_1m_min_mean_max"] or [0.0, 0.0, 0.0]
    over = max(1.0, float(loads[1]) / (os.cpu_count() or 1))  # type: ignore[index]
    bound = FAST_P99_BOUND_MS * over
    figures["fast_p99_bound_ms"] = round(bound)
    if not p99 < bound:
        behaviour.append(f"recall p99 {p99:.0f} ms over the fast variant's {bound:.0f} ms bound "
                         f"({FAST_P99_BOUND_MS:.0f} ms x {over:.1f}, the load average per CPU)")
    record(ROW_UNCACHED, not behaviour, figures, "; ".join(behaviour) + (
        f" (design budgets, not asserted here: {'; '.join(budget)})" if budget else ""))
    assert not behaviour, json.dumps({"failures": behaviour, **figures}, default=str)[:4000]
