"""The sustained-load row's load on a preloaded store, traced around the indexer's HNSW builds.

Starts the stack as `make run` does (the chaos suite's launcher), ingests `--preload` of the
row's events, waits for the pipeline to drain and for the build after it, then offers the row's
load (50 recalls/s and 200 events/s in posts of 10) for `--seconds`. Every recall's latency is
kept (from its scheduled moment), and every service's CPU time twice a second. The builds are
read from the indexer's log. Prints the machine, the recall percentiles, the cores each service
used, recall latency by its time relative to the end of a build, and the share of recalls over
the row's budget after builds against the rest. The row itself (`tests/chaos/`) starts from an
empty store; this holds the store at the size where builds take seconds. Usage:

    python -m bench.row_trace [--preload 80000] [--seconds 240] [--out trace.json]

Why the builds: docs/perf/2026-11-28-ingest-pacing.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import nats
from totalrecall_schema import Topology

from bench.machine import describe
from tests.chaos import load_client as load
from tests.chaos.stack_inputs import Stack, chaos_stack

#: The row's budget (tests/chaos/test_sustained_load.py).
BUDGET_MS = 100.0
RECALLS_PER_S, POSTS_PER_S, EVENTS_PER_POST = 50, 20, 10

_BUILD_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) INFO totalrecall\.indexer "
    r"(building the HNSW|HNSW built)")


@dataclass
class Trace:
    #: (seconds since the load began, latency in ms) of every recall, failed ones included
    recalls: list[tuple[float, float]] = field(default_factory=list)
    failed: int = 0
    #: posts of events that failed (a timeout, an error status)
    ingest_failed: int = 0
    #: (seconds since the load began, CPU seconds used so far by each service)
    cpu: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    #: CPU seconds the hypervisor had taken from the machine at each of those moments
    stolen: list[float] = field(default_factory=list)
    #: wall clock (epoch seconds) of the load's second 0
    t0_wall: float = 0.0


def builds(log_text: str, t0_wall: float) -> list[tuple[float, float]]:
    """(start, end) of each completed HNSW build in the indexer's log, in seconds since
    `t0_wall` (the log's times are UTC)."""
    starts: list[float] = []
    out: list[tuple[float, float]] = []
    for line in log_text.splitlines():
        m = _BUILD_LINE.match(line)
        if m is None:
            continue
        at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(
            tzinfo=UTC).timestamp() - t0_wall
        if m.group(2) == "building the HNSW":
            starts.append(at)
        elif starts:
            out.append((starts.pop(), at))
    return out


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else 0.0


def around_ends(recalls: Sequence[tuple[float, float]], ends: Sequence[float],
                before_s: float = 2.0, after_s: float = 6.0, bin_s: float = 1.0
                ) -> list[tuple[float, int, float, float]]:
    """Recalls by their time relative to the nearest build end within the window:
    (bin start in seconds, count, p50, p90) per bin."""
    bins: dict[int, list[float]] = {}
    for t, ms in recalls:
        for end in ends:
            if -before_s <= t - end < after_s:
                bins.setdefault(int((t - end + before_s) // bin_s), []).append(ms)
    return [(k * bin_s - before_s, len(v), percentile(v, 0.5), percentile(v, 0.9))
            for k, v in sorted(bins.items())]


def slow_share(recalls: Sequence[tuple[float, float]], spans: Sequence[tuple[float, float]],
               after_s: float = 3.0, budget_ms: float = BUDGET_MS) -> dict[str, tuple[int, int]]:
    """(recalls over the budget, recalls) during builds, in the `after_s` after their ends,
    and the rest of the time."""
    out = {"building": [0, 0], "after a build": [0, 0], "the rest": [0, 0]}
    for t, ms in recalls:
        zone = "the rest"
        for start, end in spans:
            if start <= t < end:
                zone = "building"
            elif end <= t < end + after_s and zone == "the rest":
                zone = "after a build"
        out[zone][0] += ms > budget_ms
        out[zone][1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


async def _drive(stack: Stack, preload: int, seconds: float) -> Trace:
    pids = load.service_pids(stack)
    ns, rng = f"trace-{uuid.uuid4().hex[:8]}", random.Random(9)
    client = load.Pool(stack.url, stack.headers, size=64)
    nc = await nats.connect(stack.running.nats_url)
    js, topo = nc.jetstream(), Topology()
    for _ in range(preload // 500):
        await client.post("/memory/ingest", [load.event(ns, rng) for _ in range(500)],
                          timeout=120)
    while sum(await load.lag(js, topo)):
        await asyncio.sleep(1)
    await asyncio.sleep(35)  # the build after the preload
    trace = Trace()
    t0 = time.monotonic() + 0.5
    trace.t0_wall = time.time() + 0.5

    async def recall(at: float) -> None:
        try:
            code = await client.post("/memory/recall", {
                "query": rng.choice(load.QUERIES), "namespace": ns, "maxResults": 6,
                "timeframe": "auto"})
        except Exception:  # a timeout, a reset: counted, its latency kept
            code = 0
        trace.failed += code != 200
        trace.recalls.append((at - t0, (time.monotonic() - at) * 1000))

    async def ingest(_at: float) -> None:
        try:
            code = await client.post("/memory/ingest",
                                     [load.event(ns, rng) for _ in range(EVENTS_PER_POST)])
        except Exception:  # counted like a failed recall
            code = 0
        trace.ingest_failed += code != 200

    async def sample(stop: asyncio.Event) -> None:
        while not stop.is_set():
            # Off the event loop, which would answer no recall while /proc is read.
            cpu, stolen = await asyncio.to_thread(
                lambda: (load.cpu_seconds(pids), load.stolen_seconds()))
            trace.cpu.append((time.monotonic() - t0, cpu))
            trace.stolen.append(stolen)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)

    stop = asyncio.Event()
    sampler = asyncio.create_task(sample(stop))
    await asyncio.gather(load.fixed_rate(RECALLS_PER_S, seconds, t0, recall),
                         load.fixed_rate(POSTS_PER_S, seconds, t0, ingest))
    stop.set()
    await sampler
    await client.close()
    await nc.drain()
    return trace


def report(trace: Trace, log_text: str) -> list[str]:
    lat = [ms for _, ms in trace.recalls]
    spans = [s for s in builds(log_text, trace.t0_wall) if s[0] >= 0]
    (t_a, a), (t_b, b) = trace.cpu[0], trace.cpu[-1]
    cores = {name: round((b[name] - a[name]) / (t_b - t_a), 2) for name in b}
    stolen = (trace.stolen[-1] - trace.stolen[0]) / (t_b - t_a) if trace.stolen else 0.0
    lines = [
        f"recalls {len(lat)} (failed {trace.failed}; event posts failed "
        f"{trace.ingest_failed}): p50 / p90 / p99 "
        f"{percentile(lat, .5):.0f} / {percentile(lat, .9):.0f} / {percentile(lat, .99):.0f} ms",
        f"cores {sum(cores.values()):.2f}: {json.dumps(cores)}",
        f"cores stolen by the host: {stolen:.2f}",
        f"builds {len(spans)}: " + ", ".join(f"{s:.0f}-{e:.0f} s" for s, e in spans),
        "recall by time from a build's end: s, n, p50, p90 (ms)",
    ]
    lines += [f"  {at:+5.1f} {n:5d} {p50:6.0f} {p90:6.0f}"
              for at, n, p50, p90 in around_ends(trace.recalls, [e for _, e in spans])]
    for zone, (slow, n) in slow_share(trace.recalls, spans).items():
        lines.append(f"over {BUDGET_MS:.0f} ms, {zone}: {slow} of {n}"
                     + (f" ({100 * slow / n:.1f} %)" if n else ""))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preload", type=int, default=80_000)
    ap.add_argument("--seconds", type=float, default=240)
    ap.add_argument("--out", type=Path, help="the trace as JSON")
    args = ap.parse_args()
    print(describe(), flush=True)
    with tempfile.TemporaryDirectory(prefix="tr-trace-") as tmp:
        home = Path(tmp)
        with chaos_stack(home) as stack:
            trace = asyncio.run(_drive(stack, args.preload, args.seconds))
            log_text = (stack.home / "logs" / "indexer.log").read_text()
    if args.out is not None:
        args.out.write_text(json.dumps(trace.__dict__))
    print("\n".join(report(trace, log_text)), flush=True)


if __name__ == "__main__":
    main()
