"""Indexer benchmark: ingest throughput, time-to-searchable, search latency per tier, disk.

Runs the real indexer app (in this process) against a real nats-server and Postgres (started in a
temporary directory unless --nats-url/--pg-dsn are given) with synthetic EmbeddedEvents: clustered,
L2-normalised 384-d vectors, a third each aged for the hot, warm and cold tier.

    .venv/bin/python bench/indexer_bench.py              # 10k events (default)
    .venv/bin/python bench/indexer_bench.py --n 100000   # or --large (100k), --huge (1M)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
MODEL = "bench-model:000000000000"
CATEGORIES = ["error", "system.service", "system.process", "conversation", "file", "cron"]
SEVERITIES = ["info", "warning", "error", "critical"]


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]


def fmt_ms(xs: list[float]) -> str:
    return f"p50 {pct(xs, 50):7.2f} ms  p99 {pct(xs, 99):7.2f} ms  (n={len(xs)})"


def mib(n: int) -> str:
    return f"{n / 2**20:8.1f} MiB"


class Data:
    """Clustered unit vectors generated chunk by chunk (1M × 384 fp32 would be 1.5 GB)."""

    def __init__(self, n: int, seed: int = 0, clusters: int = 500, noise: float = 0.35) -> None:
        self.n = n
        rng = np.random.default_rng(seed)
        self.centroids = rng.normal(size=(clusters, DIM)).astype(np.float32)
        self.noise = noise
        self.seed = seed

    def chunk(self, start: int, stop: int) -> np.ndarray:
        rng = np.random.default_rng(self.seed * 1_000_003 + start)
        idx = rng.integers(0, len(self.centroids), size=stop - start)
        x = self.centroids[idx] + self.noise * rng.normal(size=(stop - start, DIM)).astype(
            np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def age(self, i: int) -> timedelta:
        """Chronological replay: the first third cold (400 → 100 days old), then warm
        (80 → 2 days), then hot (23 h → now)."""
        third = max(1, self.n // 3)
        part, r = divmod(i, third)
        r = r / third
        if part == 0:
            return timedelta(days=400 - 300 * r)
        if part == 1:
            return timedelta(days=80 - 78 * r)
        return timedelta(hours=23 * (1 - min(1.0, r)))


def payload(i: int, vec: np.ndarray, now: datetime, age: timedelta,
            namespace: str = "bench") -> tuple[str, bytes]:
    from totalrecall_schema import EmbeddedEvent, EventMetadata, MemoryEvent

    cat = CATEGORIES[i % len(CATEGORIES)]
    ev = MemoryEvent(id=f"b{i}", namespace=namespace, category=cat,
                     timestamp=now - age, summary=f"synthetic memory {i} in {cat}",
                     detail=f"detail text for event {i}; service svc{i % 17} restarted",
                     metadata=EventMetadata(severity=SEVERITIES[i % 4], service=f"svc{i % 17}"))
    emb = EmbeddedEvent(event=ev, vector=vec.tolist(), model=MODEL)
    return cat, emb.model_dump_json().encode()


async def run(args: argparse.Namespace) -> None:
    import nats
    from totalrecall_indexer.app import create_app
    from totalrecall_indexer.settings import Settings
    from totalrecall_schema import (
        Topology,
        VectorFilter,
        VectorSearchReply,
        VectorSearchRequest,
        ensure_streams,
    )

    own_dir = args.workdir is None
    work = Path(args.workdir or tempfile.mkdtemp(prefix="tr-indexer-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    servers: list[Any] = []
    nats_url, pg_dsn = args.nats_url, args.pg_dsn
    if nats_url is None or pg_dsn is None:
        from totalrecall.infra import NatsServer, PostgresServer, free_port

        if nats_url is None:
            ns = NatsServer(work / "nats", port=free_port(), monitor_port=free_port()).start()
            servers.append(ns)
            nats_url = ns.url
        if pg_dsn is None:
            ps = PostgresServer(work / "pg", port=free_port()).start()
            servers.append(ps)
            pg_dsn = ps.create_database(f"bench_{uuid.uuid4().hex[:8]}")
    topo = Topology.for_test("bench" + uuid.uuid4().hex[:6])
    settings = Settings(nats_url=nats_url, pg_dsn=pg_dsn, home=work / "home",
                        subject_prefix=topo.prefix, stream_prefix=topo.stream_prefix,
                        batch_size=args.batch, background_tasks=False)
    n = args.n
    print(f"indexer bench: n={n:,} dim={DIM} batch={args.batch} workdir={work}")
    print(f"machine: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
    data = Data(n)
    now = datetime.now(UTC)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, topo)
    app = create_app(settings)
    idx = app.indexer  # type: ignore[attr-defined]

    async def drained() -> bool:
        info = await js.consumer_info(topo.embedded_stream, topo.indexer_durable)
        return info.num_pending == 0 and info.num_ack_pending == 0

    async def search(vec: np.ndarray, tiers: list[str], topk: int = 10,
                     flt: VectorFilter | None = None) -> tuple[VectorSearchReply, float]:
        req = VectorSearchRequest(vector=vec.tolist(), model=MODEL, topk=topk,
                                  tiers=tiers, filter=flt or VectorFilter(namespace="bench"))
        t0 = time.perf_counter()
        msg = await nc.request(topo.rpc_vector_search, req.model_dump_json().encode(), timeout=30)
        return VectorSearchReply.model_validate_json(msg.data), (time.perf_counter() - t0) * 1e3

    try:
        async with app:
            # ---- ingest ---------------------------------------------------------------------
            t0 = time.perf_counter()
            chunk = 2000
            for start in range(0, n, chunk):
                vecs = data.chunk(start, min(n, start + chunk))
                futs = []
                for j, vec in enumerate(vecs):
                    cat, body = payload(start + j, vec, now, data.age(start + j))
                    futs.append(await js.publish_async(topo.embedded_subject(cat), body))
                await asyncio.gather(*futs)
            t_pub = time.perf_counter() - t0
            deadline = time.monotonic() + max(600, n / 50)
            while not await drained():
                if time.monotonic() > deadline:
                    raise TimeoutError("indexer did not drain the stream")
                await asyncio.sleep(0.2)
            t_ing = time.perf_counter() - t0
            st = idx.tiers.stats()
            print(f"\ningest: published {n:,} in {t_pub:.1f}s; all indexed+acked after "
                  f"{t_ing:.1f}s = {n / t_ing:,.0f} events/s "
                  f"(markdown+postgres+zvec, fsync per batch)")
            print("  docs per tier:", {t: int(s['doc_count']) for t, s in st.items()})
            samples = {s.labels["store"]: s.value for metric in idx.metrics.registry.collect()
                       for s in metric.samples
                       if metric.name == "totalrecall_indexer_write_seconds"
                       and s.name.endswith("_sum")}
            counts = {s.labels["store"]: s.value for metric in idx.metrics.registry.collect()
                      for s in metric.samples
                      if metric.name == "totalrecall_indexer_write_seconds"
                      and s.name.endswith("_count")}
            for store, total in sorted(samples.items()):
                c = counts.get(store, 1) or 1
                print(f"  write {store:9s}: {total:6.1f}s total, {1000 * total / c:6.1f} ms/batch"
                      f" over {int(c)} batches")

            # ---- time to searchable ---------------------------------------------------------
            probes = Data(args.probes, seed=99).chunk(0, args.probes)
            tts = []
            for k, vec in enumerate(probes):
                i = n + k
                cat, body = payload(i, vec, datetime.now(UTC), timedelta(0))
                t0 = time.perf_counter()
                await js.publish(topo.embedded_subject(cat), body)
                want = f"b{i}"
                while True:
                    rep, _ = await search(vec, ["hot"], topk=1)
                    if rep.hits and rep.hits[0].id == want:
                        break
                    if time.perf_counter() - t0 > 30:
                        raise TimeoutError(f"probe never became searchable: {rep}")
                    await asyncio.sleep(0.005)
                tts.append((time.perf_counter() - t0) * 1e3)
            print(f"\ntime-to-searchable (publish → vector search hit, hot tier): {fmt_ms(tts)}")

            # ---- search before HNSW build (brute force) -------------------------------------
            qs = Data(args.queries, seed=7).chunk(0, args.queries)

            async def lat(tier: str, flt: VectorFilter | None = None) -> tuple[list, list]:
                rtt, server = [], []
                for q in qs:
                    rep, ms = await search(q, [tier], flt=flt)
                    if rep.error:
                        raise RuntimeError(rep.error)
                    rtt.append(ms)
                    server.append(rep.took_ms.get(tier, float("nan")))
                return rtt, server

            print("\nsearch latency per tier, topk=10 (zvec time inside the indexer | NATS RTT)")
            if not args.skip_brute:
                for tier in ("hot", "warm", "cold"):
                    rtt, server = await lat(tier)
                    print(f"  {tier:4s} before optimize  zvec {fmt_ms(server)} | rtt "
                          f"p50 {pct(rtt, 50):.2f} p99 {pct(rtt, 99):.2f}")
            # ---- HNSW build -----------------------------------------------------------------
            if not args.no_optimize:
                t0 = time.perf_counter()
                done = await idx.optimize_once(force=True)
                print(f"\noptimize (HNSW build): {done} total {time.perf_counter() - t0:.1f}s; "
                      "completeness",
                      {t: s["index_completeness"] for t, s in idx.tiers.stats().items()})
                for tier in ("hot", "warm", "cold"):
                    rtt, server = await lat(tier)
                    print(f"  {tier:4s} after optimize   zvec {fmt_ms(server)} | rtt "
                          f"p50 {pct(rtt, 50):.2f} p99 {pct(rtt, 99):.2f}")
            flt = VectorFilter(namespace="bench", categories=["error"],
                               severities=["error", "critical"],
                               since_ms=int((now - timedelta(days=200)).timestamp() * 1000))
            for tier in ("hot", "warm", "cold"):
                rtt, server = await lat(tier, flt)
                print(f"  {tier:4s} filtered         zvec {fmt_ms(server)} | rtt "
                      f"p50 {pct(rtt, 50):.2f} p99 {pct(rtt, 99):.2f}")
            rtt, server = [], []
            for q in qs:
                rep, ms = await search(q, ["hot", "warm", "cold"])
                rtt.append(ms)
                server.append(rep.took_ms["total"])
            print(f"  all three tiers merged  total {fmt_ms(server)} | rtt "
                  f"p50 {pct(rtt, 50):.2f} p99 {pct(rtt, 99):.2f}")

            # ---- disk -----------------------------------------------------------------------
            disk = idx.tiers.disk_bytes()
            md = sum(p.stat().st_size for p in (settings.home / "memory").rglob("*.md"))
            conn = await idx.pg.pool.acquire()
            try:
                pg_bytes = await conn.fetchval("SELECT pg_total_relation_size('memories')")
            finally:
                await idx.pg.pool.release(conn)
            print("\ndisk:")
            for tier in ("hot", "warm", "cold"):
                print(f"  zvec {tier:4s} {mib(disk[tier])}")
            print(f"  postgres   {mib(int(pg_bytes))} (table + indexes)")
            print(f"  markdown   {mib(md)}")
    finally:
        await nc.close()
        for s in reversed(servers):
            s.stop()
        if own_dir and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="events to ingest (default 10k)")
    ap.add_argument("--large", action="store_true", help="100k events")
    ap.add_argument("--huge", action="store_true", help="1M events (hours on 2 cores)")
    ap.add_argument("--batch", type=int, default=256, help="consumer batch size")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--probes", type=int, default=30, help="time-to-searchable probes")
    ap.add_argument("--no-optimize", action="store_true", help="skip the HNSW build")
    ap.add_argument("--skip-brute", action="store_true", help="skip searches before optimize")
    ap.add_argument("--nats-url")
    ap.add_argument("--pg-dsn")
    ap.add_argument("--workdir", help="state directory (kept); default a temporary one")
    ap.add_argument("--keep", action="store_true", help="keep the temporary state directory")
    args = ap.parse_args()
    if args.large:
        args.n = 100_000
    if args.huge:
        args.n = 1_000_000
    asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
