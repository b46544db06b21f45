"""Indexer benchmark: ingest throughput, time until searchable, search latency and ANN recall per
tier, disk and RSS per tier.

Runs the real indexer app (in this process) against a real nats-server and Postgres (started in a
temporary directory unless --nats-url/--pg-dsn are given). Synthetic OS-like EmbeddedEvents
(journal/service/process/file/network/cron lines: summaries of 40–120 characters, most without a
detail, a few with a multi-line one; about the sizes of the design's storage budget, section 15),
with clustered L2-normalised 384-d vectors (500 centroids + Gaussian noise 0.35: real embeddings
cluster by topic, and random vectors are the worst case of every HNSW, see infra-probe A.5).
A third each is aged for the cold, warm and hot tier.

Measured:
- ingest: publish → all indexed and acked (Markdown + Postgres + Zvec, fsync per batch);
- time until searchable: per event (publish → a vector search finds it, brute force over the part
  not yet in the HNSW graph), and until each tier's HNSW graph is complete (optimize);
- vector search latency per tier (zvec time inside the indexer, and the NATS round trip), before
  and after the HNSW build, unfiltered and filtered;
- ANN recall@10 per tier: the indexer's answers against exact search (numpy brute force over the
  very same vectors), before and after the HNSW build, and filtered;
- disk per tier (+ Postgres, Markdown), RSS per tier (each collection opened alone, read-only, in
  a fresh process, after warm-up queries).

    .venv/bin/python bench/indexer_bench.py              # 10k events (default), ~40 s
    .venv/bin/python bench/indexer_bench.py --large      # 100k, ~4 min on 2 shared cores
    .venv/bin/python bench/indexer_bench.py --huge       # 1M: ~40-60 min, see below

Measured at 100k (2 cores, load ~0.7): ingest 1,323 events/s (76 s), HNSW builds of 33k docs per
tier on one thread 23 s (hot fp32) / 14 s (warm int8) / 12 s (cold int4), the whole run ~4 min.
1M (`--huge`): ingest is linear (~13 min; publishing overlaps it); the builds grow ~n·log n, about
12x per tier (hot ~5 min, warm ~3, cold ~2.5: ~10-12 min); brute-force searches before the build
take ~35 ms per query and tier (~2 min for 2 × 200 queries × 3 tiers; `--skip-brute` skips them);
exact ground truth and RSS probes a few minutes. Budget 40-60 min, ~3 GB of RAM (the 333k-doc
hot build) and ~12 GB of disk (JetStream keeps the 1M embedded events, ~8 kB each, plus ~2.2 GB
Zvec, ~0.85 GB Postgres, ~0.75 GB Markdown). `--queries 100 --skip-brute` shortens it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
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
NAMESPACE = "bench"
TIERS = ("hot", "warm", "cold")
SEVERITIES = ["info", "info", "info", "warning", "info", "error", "info", "critical"]

# OS-like templates: (category, subcategory, summary format, detail kind)
TEMPLATES: list[tuple[str, str, str, str]] = [
    ("system.service", "fail", "{svc}.service: Main process exited, code=exited, status={code}",
     "journal"),
    ("system.service", "restart", "{svc}.service: Scheduled restart job, restart counter is at {n}",
     ""),
    ("system.service", "start", "Started {svc}.service - {desc}", ""),
    ("system.process", "high_cpu", "{proc} (pid {pid}) at {pct}% CPU for 60 s", ""),
    ("system.process", "oom_kill", "Out of memory: Killed process {pid} ({proc}) "
     "total-vm:{kb}kB", "trace"),
    ("system.process", "crash", "{proc}[{pid}]: segfault at {addr} ip {addr} error 4", "trace"),
    ("file", "modify", "Modified {path}", ""),
    ("file", "create", "Created {path} ({kb} kB)", ""),
    ("system.network", "disconnect", "wlan0: disconnected from {ssid} (reason {code})", ""),
    ("system.network", "dns_fail", "DNS lookup of {host} failed: SERVFAIL", "journal"),
    ("system.storage", "space_warning", "/home is {pct}% full ({kb} kB free)", ""),
    ("cron", "executed", "cron: backup job finished in {n} s", ""),
    ("error", "application", "{proc}: error: {err}", "trace"),
    ("conversation", "user_request", "user asked: why did {svc} fail after the update?",
     "chat"),
    ("system.package", "upgrade", "upgraded {proc} {n}.{code} -> {n}.{pid}", ""),
]
WORDS = ["nginx", "postgres", "sshd", "docker", "podman", "firefox", "code", "pipewire",
         "NetworkManager", "systemd-resolved", "iwd", "cups", "bluetooth", "tailscale", "restic"]
ERRORS = ["connection refused", "permission denied", "no such file or directory",
          "address already in use", "timed out after 30 s", "certificate verify failed"]


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]


def fmt_ms(xs: list[float]) -> str:
    return f"p50 {pct(xs, 50):7.2f} ms  p99 {pct(xs, 99):7.2f} ms  (n={len(xs)})"


def mib(n: float) -> str:
    return f"{n / 2**20:8.1f} MiB"


class Data:
    """Clustered unit vectors generated chunk by chunk (1M × 384 fp32 would be 1.5 GB)."""

    def __init__(self, n: int, seed: int = 0, clusters: int = 500, noise: float = 0.35) -> None:
        self.n = n
        rng = np.random.default_rng(seed)
        self.centroids = rng.normal(size=(clusters, DIM)).astype(np.float32)
        self.noise = noise
        self.seed = seed

    BLOCK = 1000

    def _block(self, b: int) -> np.ndarray:
        rng = np.random.default_rng(self.seed * 1_000_003 + b)
        idx = rng.integers(0, len(self.centroids), size=self.BLOCK)
        x = self.centroids[idx] + self.noise * rng.normal(size=(self.BLOCK, DIM)).astype(
            np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def chunk(self, start: int, stop: int) -> np.ndarray:
        """Vectors start..stop-1: a function of the index alone, however they are chunked."""
        parts = []
        for b in range(start // self.BLOCK, (stop - 1) // self.BLOCK + 1):
            lo, hi = b * self.BLOCK, (b + 1) * self.BLOCK
            parts.append(self._block(b)[max(start, lo) - lo: min(stop, hi) - lo])
        return np.concatenate(parts) if parts else np.zeros((0, DIM), np.float32)

    def queries(self, m: int, seed: int) -> np.ndarray:
        """Queries about the same topics as the data: its centroids plus fresh noise."""
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(self.centroids), size=m)
        x = self.centroids[idx] + self.noise * rng.normal(size=(m, DIM)).astype(np.float32)
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

    def tier_range(self, tier: str) -> tuple[int, int]:
        third = max(1, self.n // 3)
        return {"cold": (0, third), "warm": (third, 2 * third), "hot": (2 * third, self.n)}[tier]


def template(i: int) -> tuple[str, str, str, str]:
    return TEMPLATES[(i * 7919) % len(TEMPLATES)]


def severity(i: int) -> str:
    return SEVERITIES[(i * 31) % len(SEVERITIES)]


def event_text(i: int) -> tuple[str, str]:
    """(summary, detail) of event i: deterministic, OS-like."""
    _cat, _sub, fmt, kind = template(i)
    h = (i * 2654435761) & 0xFFFFFFFF
    vals = dict(svc=WORDS[h % len(WORDS)], proc=WORDS[(h >> 4) % len(WORDS)], code=h % 256,
                n=h % 97, pid=1000 + h % 60000, pct=50 + h % 50, kb=h % 9_000_000,
                addr=f"{h:08x}", path=f"/home/user/src/proj{h % 40}/mod{h % 300}.py",
                ssid=f"net-{h % 9}", host=f"api{h % 20}.example.org", err=ERRORS[h % len(ERRORS)],
                desc="A service")
    summary = fmt.format(**vals)
    detail = ""
    if kind == "journal" and h % 3 == 0:
        detail = "\n".join(f"{WORDS[(h >> k) % len(WORDS)]}[{vals['pid']}]: "
                           f"{ERRORS[(h >> (k + 1)) % len(ERRORS)]}" for k in range(1 + h % 6))
    elif kind == "trace" and h % 4 == 0:
        detail = "Traceback (most recent call last):\n" + "".join(
            f'  File "/usr/lib/python3/{WORDS[(h >> k) % len(WORDS)]}.py", line {k * 17 + 3}, '
            f"in f{k}\n" for k in range(3 + h % 12)) + f"RuntimeError: {vals['err']}"
    elif kind == "chat":
        detail = (f"The user wonders whether the {vals['svc']} failure is related to the last "
                  f"upgrade; the agent checked the journal and found '{vals['err']}'.")
    return summary, detail


def payload(i: int, vec: np.ndarray, now: datetime, age: timedelta) -> tuple[str, bytes]:
    from totalrecall_schema import EmbeddedEvent, EventMetadata, MemoryEvent

    cat, sub, _fmt, _kind = template(i)
    summary, detail = event_text(i)
    ev = MemoryEvent(id=f"b{i}", namespace=NAMESPACE, category=cat, subcategory=sub,
                     timestamp=now - age, summary=summary, detail=detail, source="bench",
                     metadata=EventMetadata(severity=severity(i), service=WORDS[i % len(WORDS)]))
    emb = EmbeddedEvent(event=ev, vector=vec.tolist(), model=MODEL)
    return cat, emb.model_dump_json().encode()


# --- exact search (ground truth) --------------------------------------------------------------
def exact_topk(queries: np.ndarray, data: Data, ranges: list[tuple[Data, int, int]], k: int,
               mask_fn: Any = None, chunk: int = 50_000) -> list[list[str]]:
    """Top-k ids by cosine over the docs in `ranges` (each: a Data and [start, stop) of ids,
    id offset implied by the Data's index), optionally only those where mask_fn(i) is True."""
    best_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_i = np.full((len(queries), k), -1, dtype=np.int64)
    for src, start, stop in ranges:
        offset = 0 if src is data else data.n
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            x = src.chunk(s, e)
            ids = np.arange(s, e) + offset
            if mask_fn is not None:
                keep = np.array([mask_fn(int(i)) for i in ids], dtype=bool)
                x, ids = x[keep], ids[keep]
                if not len(ids):
                    continue
            scores = queries @ x.T
            all_s = np.concatenate([best_s, scores], axis=1)
            all_i = np.concatenate([best_i, np.broadcast_to(ids, scores.shape)], axis=1)
            top = np.argpartition(-all_s, k - 1, axis=1)[:, :k]
            best_s = np.take_along_axis(all_s, top, axis=1)
            best_i = np.take_along_axis(all_i, top, axis=1)
    order = np.argsort(-best_s, axis=1)
    best_i = np.take_along_axis(best_i, order, axis=1)
    return [[f"b{i}" for i in row if i >= 0] for row in best_i]


def recall(got: list[list[str]], want: list[list[str]], k: int = 10) -> float:
    hits = sum(len(set(g[:k]) & set(w[:k])) for g, w in zip(got, want, strict=True))
    total = sum(min(k, len(w)) for w in want)
    return hits / total if total else float("nan")


# --- RSS of one tier, in a fresh process ------------------------------------------------------
_PROBE = r'''
import json, sys, time
import numpy as np
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
import zvec
from zvec import CollectionOption, HnswQueryParam, Query
path, tier, qfile = sys.argv[1], sys.argv[2], sys.argv[3]
q = np.load(qfile)
base = rss()
col = zvec.open(path, CollectionOption(read_only=True))
opened = rss()
param = HnswQueryParam(ef=128, is_using_refiner=tier != "hot")
lat = []
for rep in range(3):
    for v in q:
        t0 = time.perf_counter()
        col.query(Query("semantic", vector=v.tolist(), param=param), topk=10,
                  output_fields=["id"])
        lat.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"base": base, "opened": opened, "queried": rss(), "lat_ms": lat[len(q):]}))
'''


def rss_probe(root: Path, tier: str, queries: np.ndarray) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".npy", delete=False) as fh:
        np.save(fh, queries)
    try:
        out = subprocess.run([sys.executable, "-c", _PROBE, str(root / tier), tier, fh.name],
                             capture_output=True, text=True, timeout=900, check=True)
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        os.unlink(fh.name)


def own_rss() -> tuple[int, int]:
    vals = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                vals[line.split(":")[0]] = int(line.split()[1]) * 1024
    return vals.get("VmRSS", 0), vals.get("VmHWM", 0)


# --- the run ------------------------------------------------------------------------------------
async def run(args: argparse.Namespace) -> None:
    import nats
    from totalrecall_indexer.api import Settings, create_app
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
        from totalrecall.infra import NatsServer, PostgresServer, free_port, free_ports

        if nats_url is None:
            port, monitor_port = free_ports(2)
            ns = NatsServer(work / "nats", port=port, monitor_port=monitor_port).start()
            servers.append(ns)
            nats_url = ns.url
        if pg_dsn is None:
            ps = PostgresServer(work / "pg", port=free_port()).start()
            servers.append(ps)
            pg_dsn = ps.create_database(f"bench_{uuid.uuid4().hex[:8]}")
    topo = Topology.for_test("bench" + uuid.uuid4().hex[:6])
    settings = Settings(nats_url=nats_url, pg_dsn=pg_dsn, home=work / "home",
                        subject_prefix=topo.prefix, stream_prefix=topo.stream_prefix,
                        batch_size=args.batch, background_tasks=False, metrics_interval_s=0,
                        memory_md_poll_s=0, optimize_threads=args.optimize_threads)
    n = args.n
    print(f"indexer bench: n={n:,} dim={DIM} batch={args.batch} workdir={work}")
    print(f"machine: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}; vectors: clustered "
          f"(500 centroids, noise 0.35); HNSW m=16 ef_construction=200, search ef=128, "
          f"optimize threads={args.optimize_threads}")
    data = Data(n)
    probes = Data(args.probes, seed=99)
    now = datetime.now(UTC)
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    await ensure_streams(js, topo)
    app = create_app(settings)
    idx = app.indexer  # type: ignore[attr-defined]
    report: dict[str, Any] = {"n": n}

    async def drained() -> bool:
        info = await js.consumer_info(topo.embedded_stream, topo.indexer_durable)
        return info.num_pending == 0 and info.num_ack_pending == 0

    async def search(vec: np.ndarray, tiers: list[str], topk: int = 10,
                     flt: VectorFilter | None = None) -> tuple[VectorSearchReply, float]:
        req = VectorSearchRequest(vector=vec.tolist(), model=MODEL, topk=topk,
                                  tiers=tiers, filter=flt or VectorFilter(namespace=NAMESPACE))
        t0 = time.perf_counter()
        msg = await nc.request(topo.rpc_vector_search, req.model_dump_json().encode(), timeout=60)
        return VectorSearchReply.model_validate_json(msg.data), (time.perf_counter() - t0) * 1e3

    qs = data.queries(args.queries, seed=7)
    # Off-topic queries (other centroids): their neighbours are many near-equal, low-similarity
    # docs from several clusters, the hard case for any HNSW.
    qs_ood = Data(args.queries, seed=7).chunk(0, args.queries)
    flt = VectorFilter(namespace=NAMESPACE, categories=["error", "system.service"],
                       severities=["error", "critical", "warning"])

    def flt_mask(i: int) -> bool:
        return template(i)[0] in ("error", "system.service") and severity(i) in (
            "error", "critical", "warning")

    def ranges(tier: str) -> list[tuple[Data, int, int]]:
        lo, hi = data.tier_range(tier)
        rs = [(data, lo, hi)]
        if tier == "hot":
            rs.append((probes, 0, args.probes))  # the time-to-searchable probes live there too
        return rs

    print("exact ground truth (numpy brute force) …", flush=True)
    t0 = time.perf_counter()
    truth = {t: exact_topk(qs, data, ranges(t), 10) for t in TIERS}
    truth_f = {t: exact_topk(qs, data, ranges(t), 10, flt_mask) for t in TIERS}
    truth_ood = {t: exact_topk(qs_ood, data, ranges(t), 10) for t in TIERS}
    print(f"  {time.perf_counter() - t0:.1f}s")

    async def measure(tier: str, label: str, filtered: bool = False) -> dict[str, Any]:
        rtt, server, got = [], [], []
        for q in qs:
            rep, ms = await search(q, [tier], flt=flt if filtered else None)
            if rep.error:
                raise RuntimeError(rep.error)
            rtt.append(ms)
            server.append(rep.took_ms.get(tier, float("nan")))
            got.append([h.id for h in rep.hits])
        r = recall(got, (truth_f if filtered else truth)[tier])
        out = {"zvec_p50_ms": pct(server, 50), "zvec_p99_ms": pct(server, 99),
               "rtt_p50_ms": pct(rtt, 50), "rtt_p99_ms": pct(rtt, 99), "recall_at_10": r}
        extra = ""
        if not filtered:
            got_ood = [[h.id for h in (await search(q, [tier]))[0].hits] for q in qs_ood]
            out["recall_at_10_off_topic"] = recall(got_ood, truth_ood[tier])
            extra = f" (off-topic {out['recall_at_10_off_topic']:.3f})"
        print(f"  {tier:4s} {label:17s} zvec {fmt_ms(server)} | rtt p50 {pct(rtt, 50):6.2f} "
              f"p99 {pct(rtt, 99):6.2f} | recall@10 {r:.3f}{extra}")
        return out

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
            print(f"\ningest: published {n:,} in {t_pub:.1f}s; all indexed+acked (searchable, "
                  f"brute force) after {t_ing:.1f}s = {n / t_ing:,.0f} events/s "
                  f"(markdown+postgres+zvec, fsync per batch)")
            print("  docs per tier:", {t: int(s['doc_count']) for t, s in st.items()})
            report["ingest"] = {"publish_s": t_pub, "indexed_s": t_ing,
                                "events_per_s": n / t_ing}
            sums = {s.labels["store"]: s.value for metric in idx.metrics.registry.collect()
                    for s in metric.samples
                    if metric.name == "totalrecall_indexer_write_seconds"
                    and s.name.endswith("_sum")}
            counts = {s.labels["store"]: s.value for metric in idx.metrics.registry.collect()
                      for s in metric.samples
                      if metric.name == "totalrecall_indexer_write_seconds"
                      and s.name.endswith("_count")}
            for store, total in sorted(sums.items()):
                c = counts.get(store, 1) or 1
                print(f"  write {store:9s}: {total:6.1f}s total, {1000 * total / c:6.1f} ms/batch"
                      f" over {int(c)} batches")

            # ---- time until searchable, per event -------------------------------------------
            tts = []
            for k, vec in enumerate(probes.chunk(0, args.probes)):
                i = n + k
                cat, body = payload(i, vec, datetime.now(UTC), timedelta(0))
                t0 = time.perf_counter()
                await js.publish(topo.embedded_subject(cat), body)
                while True:
                    rep, _ = await search(vec, ["hot"], topk=1)
                    if rep.hits and rep.hits[0].id == f"b{i}":
                        break
                    if time.perf_counter() - t0 > 30:
                        raise TimeoutError(f"probe never became searchable: {rep}")
                    await asyncio.sleep(0.005)
                tts.append((time.perf_counter() - t0) * 1e3)
            print(f"\ntime until searchable (publish → vector search hit, hot tier, "
                  f"not in the HNSW graph): {fmt_ms(tts)}")
            report["event_to_searchable_ms"] = {"p50": pct(tts, 50), "p99": pct(tts, 99)}

            # ---- search before the HNSW build (brute force) --------------------------------
            print("\nsearch per tier, topk=10, ef=128 (zvec time inside the indexer | NATS "
                  "round trip | recall@10 vs exact, on-topic queries (off-topic queries))")
            report["search"] = {}
            if not args.skip_brute:
                for tier in TIERS:
                    report["search"][f"{tier}_brute"] = await measure(tier, "before optimize")
            # ---- HNSW build -----------------------------------------------------------------
            if not args.no_optimize:
                built: dict[str, float] = {}
                for tier in TIERS:  # one at a time, timed alone
                    t0 = time.perf_counter()
                    await asyncio.to_thread(idx.tiers.optimize, tier)
                    built[tier] = time.perf_counter() - t0
                comp = {t: s["index_completeness"] for t, s in idx.tiers.stats().items()}
                print(f"\nHNSW build (optimize, {args.optimize_threads} thread): "
                      + ", ".join(f"{t} {s:.1f}s" for t, s in built.items())
                      + f"; index completeness {comp}")
                report["optimize_s"] = built
                report["index_completeness"] = comp
                for tier in TIERS:
                    report["search"][f"{tier}_hnsw"] = await measure(tier, "after optimize")
            for tier in TIERS:
                report["search"][f"{tier}_filtered"] = await measure(tier, "filtered", True)
            rtt, server = [], []
            for q in qs:
                rep, ms = await search(q, list(TIERS))
                rtt.append(ms)
                server.append(rep.took_ms["total"])
            print(f"  all three tiers merged  total {fmt_ms(server)} | rtt "
                  f"p50 {pct(rtt, 50):.2f} p99 {pct(rtt, 99):.2f}")
            await idx.refresh_metrics()
            exported = [s for m in idx.metrics.registry.collect() for s in m.samples
                        if s.name == "totalrecall_indexer_index_completeness_ratio"]
            print("  metric totalrecall_indexer_index_completeness_ratio:",
                  {s.labels["tier"]: s.value for s in exported})

            # ---- disk -----------------------------------------------------------------------
            disk = idx.tiers.disk_bytes()
            md = sum(p.stat().st_size for p in (settings.home / "memory").rglob("*.md"))
            conn = await idx.pg.pool.acquire()
            try:
                pg_bytes = await conn.fetchval("SELECT pg_total_relation_size('memories')")
            finally:
                await idx.pg.pool.release(conn)
            total = n + args.probes
            print("\ndisk:")
            for tier in TIERS:
                docs = int(st[tier]["doc_count"]) or 1
                print(f"  zvec {tier:4s} {mib(disk[tier])}  ({disk[tier] / docs:,.0f} B/doc)")
            print(f"  postgres   {mib(int(pg_bytes))} (table + indexes, {pg_bytes / total:,.0f} "
                  "B/memory)")
            print(f"  markdown   {mib(md)} ({md / total:,.0f} B/memory)")
            report["disk_bytes"] = {**disk, "postgres": int(pg_bytes), "markdown": md}
            rss, hwm = own_rss()
            print(f"  bench process (indexer in-process + bench data): RSS {mib(rss)}, "
                  f"peak {mib(hwm)}")
    finally:
        await nc.close()

    try:
        # ---- RSS per tier: each collection alone, read-only, fresh process -------------------
        print("\nRSS per tier (a fresh process opens one collection read-only and runs "
              f"{args.queries * 3} queries; zvec mmaps its files):")
        report["rss"] = {}
        for tier in TIERS:
            r = rss_probe(settings.zvec_dir, tier, qs)
            print(f"  {tier:4s} open +{mib(r['opened'] - r['base'])}, after queries "
                  f"+{mib(r['queried'] - r['base'])} (process base {mib(r['base'])}); "
                  f"in-process query {fmt_ms(r['lat_ms'])}")
            report["rss"][tier] = {k: v for k, v in r.items() if k != "lat_ms"}
            report["rss"][tier]["query_p50_ms"] = pct(r["lat_ms"], 50)
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2, default=str))
            print(f"\nreport written to {args.json}")
    finally:
        for s in reversed(servers):
            s.stop()
        if own_dir and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="events to ingest (default 10k)")
    ap.add_argument("--large", action="store_true", help="100k events")
    ap.add_argument("--huge", action="store_true", help="1M events (~40-60 min on 2 cores)")
    ap.add_argument("--batch", type=int, default=256, help="consumer batch size")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--probes", type=int, default=30, help="time-to-searchable probes")
    ap.add_argument("--optimize-threads", type=int, default=1,
                    help="HNSW build threads (the service's default is 1)")
    ap.add_argument("--no-optimize", action="store_true", help="skip the HNSW build")
    ap.add_argument("--skip-brute", action="store_true", help="skip searches before optimize")
    ap.add_argument("--nats-url")
    ap.add_argument("--pg-dsn")
    ap.add_argument("--workdir", help="state directory (kept); default a temporary one")
    ap.add_argument("--keep", action="store_true", help="keep the temporary state directory")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args()
    if args.large:
        args.n = 100_000
    if args.huge:
        args.n = 1_000_000
    asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
