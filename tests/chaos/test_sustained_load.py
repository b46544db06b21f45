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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import nats
import psutil
import pytest
from totalrecall_schema import Topology

from bench.machine import describe
from tests.chaos.report import ROWS, record
from tests.chaos.stack_inputs import Stack, chaos_stack, wait_for

ROW = next(r for r in ROWS if r.startswith("sustained load:"))
#: architecture.md "Latency budgets": hot tier < 100 ms (the automatic recall on every prompt
#: about 85 ms). Timeframe "auto" on memories of the last minutes searches the hot tier.
P99_BUDGET_MS = 100.0
#: After the load: how long the backlog may take to drain before the row records "not drained".
DRAIN_TIMEOUT_S = 300.0
SERVICES = ("totalrecall_recall_api", "totalrecall_embedder", "totalrecall_indexer",
            "totalrecall_watchers", "nats-server", "postgres")

UNITS = ["nginx.service", "postgresql.service", "sshd.service", "docker.service", "cron.service",
         "redis.service", "grafana-server.service", "systemd-resolved.service"]
VERBS = ["failed: port {p} already in use", "restarted after watchdog timeout ({p} ms)",
         "entered failed state with result 'exit-code' {p}", "OOM killed worker {p}",
         "reload finished in {p} ms", "connection refused to 10.0.{q}.{p}"]
QUERIES = ["why did nginx fail?", "what was OOM killed?", "postgres port in use",
           "which service restarted after a watchdog timeout?", "connection refused errors",
           "redis failures today", "what happened to docker?", "slow reloads of grafana"]


def _event(ns: str, rng: random.Random) -> dict[str, Any]:
    unit = rng.choice(UNITS)
    text = rng.choice(VERBS).format(p=rng.randint(1, 65535), q=rng.randint(0, 255))
    return {"summary": f"{unit} {text}", "category": "system.service", "namespace": ns,
            "detail": f"run {uuid.uuid4().hex[:12]} on host builder-{rng.randint(1, 40)}",
            "metadata": {"severity": "error", "service": unit}}


class Pool:
    """A fixed pool of keep-alive HTTP/1.1 connections for JSON POSTs. (httpx's pool spends
    quadratic time assigning thousands of queued requests: under load the client, not the
    server, became the bottleneck.) A request waits for a free connection; its latency still
    counts from its scheduled time."""

    def __init__(self, url: str, headers: dict[str, str], size: int) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.size = size
        self.free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter] | None] = \
            asyncio.Queue()
        for _ in range(size):
            self.free.put_nowait(None)  # opened on first use

    async def post(self, path: str, body: Any, timeout: float = 30) -> int:
        # A request that waited `timeout` for a connection fails like one the server held.
        conn = await asyncio.wait_for(self.free.get(), timeout)
        try:
            if conn is not None and conn[0].at_eof():
                conn[1].close()  # the server closed it while idle (keep-alive timeout)
                conn = None
            reused = conn is not None
            if conn is None:
                conn = await asyncio.open_connection(self.host, self.port)
            try:
                status = await asyncio.wait_for(self._exchange(conn, path, body), timeout)
            except ConnectionResetError:
                if not reused:
                    raise
                # Closed by the server as it went idle, just before this request: once more
                # on a new connection (as an HTTP client's pool does).
                conn[1].close()
                conn = await asyncio.open_connection(self.host, self.port)
                status = await asyncio.wait_for(self._exchange(conn, path, body), timeout)
        except BaseException:
            if conn is not None:
                conn[1].close()
            self.free.put_nowait(None)
            raise
        self.free.put_nowait(conn)
        return status

    async def _exchange(self, conn: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                        path: str, body: Any) -> int:
        reader, writer = conn
        data = json.dumps(body).encode()
        writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\n{self.extra}"
                     f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
                     .encode() + data)
        await writer.drain()
        line = await reader.readline()
        if not line:
            raise ConnectionResetError("the server closed the connection")
        status = int(line.split()[1])
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        await reader.readexactly(length)
        return status

    async def close(self) -> None:
        while not self.free.empty():
            conn = self.free.get_nowait()
            if conn is not None:
                conn[1].close()


@dataclass
class Figures:
    recall_ms: list[float] = field(default_factory=list)
    recall_errors: dict[str, int] = field(default_factory=dict)
    ingest_ms: list[float] = field(default_factory=list)
    ingest_errors: dict[str, int] = field(default_factory=dict)
    events_sent: int = 0
    late_sends: int = 0  # the client itself fell behind its schedule by > 100 ms
    rss_mb: dict[str, list[float]] = field(default_factory=dict)
    lag: list[tuple[float, int, int]] = field(default_factory=list)  # t, embedder, indexer
    load: list[tuple[float, float]] = field(default_factory=list)  # t, 1-min load average


async def _fixed_rate(rate: float, duration: float, t0: float,
                      send: Any, figures: Figures) -> None:
    tasks: set[asyncio.Task[None]] = set()
    for i in range(int(rate * duration)):
        scheduled = t0 + i / rate
        delay = scheduled - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        elif delay < -0.1:
            figures.late_sends += 1
        task = asyncio.create_task(send(scheduled))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)


def _service_pids(stack: Stack) -> dict[str, int]:
    found: dict[str, int] = {}
    for child in psutil.Process(stack.running.proc.pid).children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
        except psutil.Error:
            continue
        for name in SERVICES:
            if name in cmd and name not in found and (name != "postgres" or "-D" in cmd):
                found[name] = child.pid
    return found


def _memory_mb(proc: psutil.Process) -> float:
    """Proportional set size: shared pages divided among the processes that map them. (Postgres's
    backends each map the shared buffers: summing their RSS counted those pages once per backend
    that had touched them, a "growth" of 800 MB that was the pool warming up.)"""
    try:
        return float(proc.memory_full_info().pss) / 2**20
    except (psutil.AccessDenied, AttributeError):
        return float(proc.memory_info().rss) / 2**20


def _rss(pids: dict[str, int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            proc = psutil.Process(pid)
            # Postgres: the postmaster and its backends (the pool's connections) together.
            procs = [proc, *proc.children(recursive=True)] if name == "postgres" else [proc]
            out[name] = sum(_memory_mb(p) for p in procs)
        except psutil.Error:
            out[name] = 0.0
    return out


async def _lag(js: Any, topo: Topology) -> tuple[int, int]:
    emb = await js.consumer_info(topo.events_stream, topo.embedder_durable)
    idx = await js.consumer_info(topo.embedded_stream, topo.indexer_durable)
    return (emb.num_pending + emb.num_ack_pending, idx.num_pending + idx.num_ack_pending)


async def _run(stack: Stack, recall_rate: float, events_rate: float, duration: float,
               batch: int) -> Figures:
    figures = Figures()
    ns = f"load-{uuid.uuid4().hex[:8]}"
    rng = random.Random(20261125)
    pids = _service_pids(stack)
    nc = await nats.connect(stack.running.nats_url)
    js = nc.jetstream()
    topo = Topology()
    client = Pool(stack.url, stack.headers, size=64)
    try:
        # Something to recall from the first request on.
        for _ in range(10):
            await client.post("/memory/ingest", [_event(ns, rng) for _ in range(50)])

        async def recall(scheduled: float) -> None:
            try:
                code = str(await client.post("/memory/recall", {
                    "query": rng.choice(QUERIES), "namespace": ns, "maxResults": 6,
                    "timeframe": "auto"}))
            except (OSError, TimeoutError, ValueError, IndexError) as exc:
                code = type(exc).__name__
            if code == "200":
                figures.recall_ms.append((time.monotonic() - scheduled) * 1000)
            else:
                figures.recall_errors[code] = figures.recall_errors.get(code, 0) + 1

        async def ingest(scheduled: float) -> None:
            body = [_event(ns, rng) for _ in range(batch)]
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
                for name, mb in _rss(pids).items():
                    figures.rss_mb.setdefault(name, []).append(round(mb, 1))
                figures.lag.append((t, *await _lag(js, topo)))
                figures.load.append((t, os.getloadavg()[0]))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=max(duration / 30, 1.0))

        t0 = time.monotonic() + 0.5
        stop = asyncio.Event()
        sampler = asyncio.create_task(sample(stop, t0))
        await asyncio.gather(_fixed_rate(recall_rate, duration, t0, recall, figures),
                             _fixed_rate(events_rate / batch, duration, t0, ingest, figures))
        stop.set()
        await sampler
    finally:
        await client.close()
    await nc.drain()
    return figures


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _grows(series: list[float], slack: float, share: float = 0.10) -> bool:
    """A trend after warm-up: the last third's mean over the middle third's by more than
    `share` plus `slack` (absolute)."""
    if len(series) < 6:
        return False
    third = len(series) // 3
    middle = statistics.fmean(series[third:2 * third])
    last = statistics.fmean(series[2 * third:])
    return last > middle * (1 + share) + slack


def _drain_s(stack: Stack) -> float | None:
    async def lag() -> tuple[int, int]:
        nc = await nats.connect(stack.running.nats_url)
        try:
            return await _lag(nc.jetstream(), Topology())
        finally:
            await nc.drain()

    start = time.monotonic()
    try:
        wait_for(lambda: asyncio.run(lag()) == (0, 0), DRAIN_TIMEOUT_S, "the pipeline to drain",
                 every=1)
    except AssertionError:
        return None  # recorded as not drained (the lag at the end is in the figures)
    return time.monotonic() - start


def _check(tmp_path: Path, recall_rate: float, events_rate: float, duration: float,
           batch: int) -> tuple[bool, dict[str, object], list[str]]:
    with chaos_stack(tmp_path / "home") as stack:
        restarts_before = stack.supervisor_restarts()
        figures = asyncio.run(_run(stack, recall_rate, events_rate, duration, batch))
        drain = _drain_s(stack)
        restarts = stack.supervisor_restarts() - restarts_before
    p50, p99 = _pct(figures.recall_ms, 0.50), _pct(figures.recall_ms, 0.99)
    emb_lag = [float(e) for _, e, _ in figures.lag]
    idx_lag = [float(i) for _, _, i in figures.lag]
    # Lag slack: two seconds of ingest (batches arrive in bursts).
    lag_slack = 2 * events_rate
    growing = {name: _grows(series, slack=30.0) for name, series in figures.rss_mb.items()}
    failures: list[str] = []
    if p99 > P99_BUDGET_MS:
        failures.append(f"recall p99 {p99:.0f} ms over the {P99_BUDGET_MS:.0f} ms budget")
    if figures.recall_errors or figures.ingest_errors:
        failures.append(f"errors: recall {figures.recall_errors}, ingest {figures.ingest_errors}")
    if any(growing.values()):
        failures.append(f"memory (PSS) grows: {[n for n, g in growing.items() if g]}")
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
        "pss_mb_start_middle_end": {n: [s[0], s[len(s) // 2], s[-1]]
                                    for n, s in figures.rss_mb.items() if s},
        "lag_embedder_max": max(emb_lag, default=0), "lag_indexer_max": max(idx_lag, default=0),
        "lag_embedder_start_middle_end": [emb_lag[0], emb_lag[len(emb_lag) // 2], emb_lag[-1]]
        if emb_lag else [],
        "lag_indexer_start_middle_end": [idx_lag[0], idx_lag[len(idx_lag) // 2], idx_lag[-1]]
        if idx_lag else [],
        "drain_after_load_s": round(drain, 1) if drain is not None else
        f"not drained in {DRAIN_TIMEOUT_S:.0f} s", "service_restarts": restarts,
        "loadavg_1m_min_mean_max": [round(min(loads), 2), round(statistics.fmean(loads), 2),
                                    round(max(loads), 2)] if loads else [],
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
