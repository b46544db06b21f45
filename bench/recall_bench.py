"""Recall latency over HTTP with N memories stored, and as a ratio to its floor: llama.cpp alone
embedding the same questions in rounds between the recalls (targets p50 ≤ 2×, p99 ≤ 4×;
`bench/floor.py`).

Starts the real stack (`totalrecall run` on free ports), seeds N synthetic OS memories, waits until
they are searchable and indexed, then times automatic recalls over HTTP and prints the figures,
including the per-stage histograms the service exports.

Seeding goes straight to the embedded stream: real MiniLM vectors of a few hundred distinct event
texts (embedded once through the embedder's batch RPC) with per-event noise, so that 100k events
do not cost 20 minutes of CPU embedding while the search, BM25 and fusion work is the real thing.

    .venv/bin/python -m bench.recall_bench --n 100000 --queries 300

Against a stack that is already running (`make run`), seeding through the real ingest path
(`POST /memory/ingest`, then the embedder and indexer) into the namespace `bench`:

    .venv/bin/python -m bench.recall_bench --url [http://127.0.0.1:8765] --n 2000 [--token T]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import nats
import numpy as np
import psutil
from totalrecall.launcher import launched_stack
from totalrecall_schema import EmbeddedEvent, EmbedReply, EmbedRequest, MemoryEvent, Topology

from bench.floor import Floor, floor_ratios, floor_samples, pooled_floor, ratio_lines
from bench.machine import describe
from bench.ratios import Figure, emit

SERVICES = ["nginx", "postgresql", "docker", "sshd", "NetworkManager", "bluetooth", "cups",
            "systemd-resolved", "pipewire", "gdm", "firefox", "code", "chrome", "slack", "zoom"]
TEMPLATES = [
    ("system.service", "error", "{s}.service failed: exit code {n}",
     "Unit {s}.service entered failed state after {n} restarts; last log: address already in use"),
    ("system.process", "warning", "{s} (PID {n}) using {p}% CPU",
     "command: /usr/bin/{s} --type=renderer; user: alice; RSS {n} MiB"),
    ("system.storage", "warning", "/home at {p}% capacity, {n} GB remaining",
     "Largest directories: ~/.cache/{s}, ~/Downloads"),
    ("system.network", "info", "Wi-Fi reconnected to HomeNet via wlp2s0 after {n}s",
     "DNS via systemd-resolved; {s} lost its connection"),
    ("system.package", "info", "Installed {s} {n}.{p} (generation {n})",
     "nix profile install {s}; closure size {p} MiB"),
    ("error", "error", "{s}: segmentation fault in libc.so.6",
     "core dumped; backtrace points at {s} plugin loader, PID {n}"),
    ("diagnosis", "info", "Slow boot traced to {s} waiting {n}s for the network",
     "Resolution: set {s} to start after network-online.target"),
    ("user_pattern", "info", "User usually runs {s} between 9 and 11 am",
     "Observed on {n} days out of the last {p}"),
    ("conversation", "info", "User asked why {s} is slow; agent found swap at {p}%",
     "Killed stale {s} renderer processes; memory pressure dropped"),
]
QUERIES = ["why is my system so slow?", "nginx failed to start", "which process used a lot of CPU?",
           "is the disk full?", "wifi keeps disconnecting", "what did I install recently?",
           "firefox crashed", "why does boot take so long?", "when do I usually run docker?",
           "postgres not starting after update", "bluetooth problems", "out of memory errors",
           "what happened with chrome yesterday?", "slack segfault", "dns resolution failures"]
#: Questions about each service: with QUERIES, 15 + 15 × 20 = 315 distinct questions, so that a
#: measurement of 300 recalls does not run on the embedder's query cache.
QUESTION_TEMPLATES = [
    "why is {s} so slow?", "{s} failed to start", "did {s} crash recently?",
    "{s} using a lot of CPU", "what happened with {s} yesterday?", "how do I fix {s} errors?",
    "when did I last update {s}?", "is {s} running?", "{s} keeps restarting",
    "why did {s} lose its connection?", "what do I usually do with {s} in the morning?",
    "{s} segmentation fault", "disk space used by {s}", "{s} slow after the upgrade",
    "network problems with {s}", "who installed {s}?", "{s} memory leak",
    "what went wrong with {s} last week?", "{s} logs show errors", "can {s} start after boot?",
]
ALL_QUERIES = QUERIES + [t.format(s=s) for t in QUESTION_TEMPLATES for s in SERVICES]

#: Whole prompts, as automatic recall gets them (the agent's message, not a search phrase): a
#: request with its context, a pasted log with the question after it, a task. The questions above
#: are 5-15 tokens; these 42-800, median 53 (the embedder keeps a query's last 128).
_LOG_LINE = ("Nov 25 09:{m:02d}:{sec:02d} workstation {s}[{pid}]: connect() failed (111: Connection "
             "refused) while connecting to upstream, client: 10.0.0.{m}, request: \"GET /api/{m}\"")
PROMPT_TEMPLATES = [
    "I restarted {s} this morning after the system update and since then it keeps failing with "
    "connection errors every few minutes. Can you look at what changed and tell me why {s} is "
    "failing?",
    "Here is what the journal shows:\n{log}\nWhat is going on with {s}, and is it the same "
    "problem as last week?",
    "Can you set up a new project for the {s} integration like the last one? Use the same layout "
    "and the tools I usually use, and remind me which version of {s} we pinned and why.",
    "My laptop got really slow an hour ago, the fans are loud and {s} seems to be involved. I "
    "closed a few windows but it did not help. What is using the CPU and memory right now, and "
    "did this happen before?",
]


def _prompts(n: int) -> list[str]:
    out = []
    for i in range(n):
        s = SERVICES[i % len(SERVICES)]
        log = "\n".join(_LOG_LINE.format(m=(i + j) % 60, sec=j, s=s, pid=4000 + i)
                        for j in range(6 + i % 10))
        out.append(PROMPT_TEMPLATES[i % len(PROMPT_TEMPLATES)].format(s=s, log=log)
                   + f" (ticket {i})")  # distinct: no query-cache hit
    return out


def _texts(rng: random.Random) -> list[tuple[str, str, str, str]]:
    out = []
    for cat, sev, summary, detail in TEMPLATES:
        for s in SERVICES:
            n, p = rng.randint(2, 9000), rng.randint(50, 99)
            out.append((cat, sev, summary.format(s=s, n=n, p=p), detail.format(s=s, n=n, p=p)))
    return out


async def _seed(nats_url: str, topo: Topology, n: int, days: float, rng: random.Random) -> float:
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    base = _texts(rng)
    vecs: list[list[float]] = []
    for i in range(0, len(base), 64):
        req = EmbedRequest(texts=[f"{b[2]}\n{b[3]}" for b in base[i:i + 64]], kind="document")
        msg = await nc.request(topo.rpc_embed_batch, req.model_dump_json().encode(), timeout=120)
        reply = EmbedReply.model_validate_json(msg.data)
        assert reply.vectors, reply.error
        vecs += reply.vectors
        model = reply.model
    base_v = np.asarray(vecs, dtype=np.float32)
    now = datetime.now(UTC)
    t0 = time.perf_counter()
    pending: list[asyncio.Future[Any]] = []
    for i in range(n):
        j = rng.randrange(len(base))
        cat, sev, summary, detail = base[j]
        v = base_v[j] + np.random.default_rng(i).normal(0, 0.02, (base_v.shape[1],)).astype(np.float32)
        v /= np.linalg.norm(v)
        ts = now - timedelta(seconds=rng.uniform(0, days * 86400))
        ev = MemoryEvent(id=f"bench-{i}", timestamp=ts, category=cat, summary=f"{summary} #{i}",
                         detail=detail, metadata={"severity": sev}, source="bench")
        emb = EmbeddedEvent(event=ev, vector=v.tolist(), model=model)
        pending.append(await js.publish_async(topo.embedded_subject(cat), emb.model_dump_json().encode(),
                                              headers={"Nats-Msg-Id": ev.key}))
        if len(pending) >= 2000:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    await nc.drain()
    return time.perf_counter() - t0


def _seed_via_ingest(client: httpx.Client, n: int, days: float, namespace: str,
                     rng: random.Random, batch: int = 250) -> float:
    """Seed through POST /memory/ingest (stable ids: a re-run stores nothing twice)."""
    base = _texts(rng)
    now = datetime.now(UTC)
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        events = []
        for i in range(start, min(n, start + batch)):
            cat, sev, summary, detail = base[rng.randrange(len(base))]
            ts = now - timedelta(seconds=rng.uniform(0, days * 86400))
            events.append({"id": f"bench-{i}", "namespace": namespace, "category": cat,
                           "summary": f"{summary} #{i}", "detail": detail,
                           "timestamp": ts.isoformat(), "metadata": {"severity": sev},
                           "source": "bench"})
        client.post("/memory/ingest", json=events).raise_for_status()
    return time.perf_counter() - t0


def _wait_indexed(api: str, n: int, timeout: float, namespace: str | None = None,
                  headers: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    while True:
        stats = httpx.get(f"{api}/memory/stats", timeout=30, headers=headers,
                          params={"namespace": namespace} if namespace else None).json()
        if stats.get("total", 0) >= n:
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"only {stats.get('total')} of {n} indexed after {timeout:.0f}s")
        time.sleep(1)


def _wait_built(api: str, timeout: float = 900.0,
                headers: dict[str, str] | None = None) -> str:
    """Wait until the indexer has no HNSW build left that the load called for (the last one of
    a bulk load can start up to a build tick after its last write and run a minute: a recall
    measured beside it measures the build). Returns what it saw."""
    from eval.client import wait_built

    try:
        seen, waited = wait_built(
            lambda: httpx.get(f"{api}/memory/stats", timeout=30, headers=headers).json(), timeout)
    except TimeoutError as exc:
        return f"{exc} (measured anyway)"
    return (f"HNSW builds after the load: {', '.join(sorted(seen))} ({waited:.0f}s)"
            if seen else "no HNSW build left after the load")


def _cpu_busy(window_s: float = 2.0) -> float:
    """The machine's busy share of CPU time over `window_s` (from /proc/stat)."""
    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields), idle
    t0, i0 = sample()
    time.sleep(window_s)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def _wait_quiet(max_busy: float = 0.15, timeout: float = 300.0) -> str:
    """Wait until the stack's background work after seeding (vacuum, statistics, index builds)
    is done: measuring on top of it reports that work, not recall. Returns what was seen."""
    deadline = time.monotonic() + timeout
    busy = _cpu_busy()
    while busy > max_busy and time.monotonic() < deadline:
        busy = _cpu_busy()
    return f"CPU {100 * busy:.0f}% busy before measuring (waited for <= {100 * max_busy:.0f}%)"


def _pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))]


def _stage_totals(metrics: str) -> dict[str, tuple[float, float]]:
    """(sum of seconds, count) per recall stage, from the Prometheus histogram."""
    out: dict[str, list[float]] = {}
    for line in metrics.splitlines():
        for part, i in (("_sum", 0), ("_count", 1)):
            if line.startswith(f"totalrecall_recall_stage_seconds{part}"):
                stage = line.split('stage="')[1].split('"')[0]
                out.setdefault(stage, [0.0, 0.0])[i] = float(line.rsplit(" ", 1)[1])
    return {k: (v[0], v[1]) for k, v in out.items()}


def _stage_means(metrics: str, before: str | None = None) -> dict[str, tuple[float, int]]:
    """(mean ms, count) per stage (sum / count), of the recalls since `before` when given."""
    now, then = _stage_totals(metrics), _stage_totals(before or "")
    out = {}
    for stage in sorted(now):
        total, n = (a - b for a, b in zip(now[stage], then.get(stage, (0.0, 0.0)), strict=True))
        if n:
            out[stage] = (1000 * total / n, int(n))
    return out


def _stage_quantiles(metrics: str, before: str | None = None) -> dict[str, str]:
    """Mean per stage as printed, of the recalls since `before` when given."""
    return {stage: f"{ms:.2f} ms (n={n})" for stage, (ms, n) in _stage_means(metrics, before).items()}


def _stage_figures(what: str, metrics: str, before: str | None = None) -> list[Figure]:
    """The Server-Timing stage means, machine-readably (`bench/ratios.py`)."""
    return [Figure(f"{what}: stage {stage} mean", ms, "ms", {"n": n})
            for stage, (ms, n) in _stage_means(metrics, before).items()]


def _counter(metrics: str, name: str, **labels: str) -> float:
    want = "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith(name + want))


def _timed(client: httpx.Client, queries: list[str], namespace: str | None = None) -> list[float]:
    """Client-side latency (ms) of one automatic recall per query, in turn."""
    extra = {"namespace": namespace} if namespace else {}
    lat: list[float] = []
    for q in queries:
        t = time.perf_counter()
        r = client.post("/memory/recall", json={"query": q, "timeframe": "auto", **extra})
        lat.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
    return lat


#: Asked before the timed questions (their CPU is in the CPU per recall, counted as recalls).
WARM_UPS = ("warm-up: is the stack ready?", "warm-up: nginx", "warm-up: disk")


def _warm_up(client: httpx.Client, namespace: str | None = None) -> None:
    extra = {"namespace": namespace} if namespace else {}
    for q in WARM_UPS:
        client.post("/memory/recall", json={"query": q, **extra})


def _measure(client: httpx.Client, queries: int, namespace: str | None = None) -> list[float]:
    _warm_up(client, namespace)
    # distinct up to 315 queries
    return _timed(client, [ALL_QUERIES[i % len(ALL_QUERIES)] for i in range(queries)], namespace)


def _measure_prompts(client: httpx.Client, prompts: int,
                     namespace: str | None = None) -> list[float]:
    return _timed(client, _prompts(prompts), namespace)


#: Rounds of the floor and the recalls it divides, in turn (`_interleaved`).
ROUNDS = 5


def slices(items: list[str], rounds: int) -> list[list[str]]:
    """`items` in `rounds` contiguous parts of near-equal length (none empty)."""
    rounds = max(1, min(rounds, len(items)))
    size, extra = divmod(len(items), rounds)
    out, start = [], 0
    for i in range(rounds):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _interleaved(client: httpx.Client, stack: Any, texts: list[str], rounds: int = ROUNDS
                 ) -> tuple[list[float], Floor, dict[str, float]]:
    """(recall latencies, their floor, the stack's CPU seconds during the recalls alone): in
    each of `rounds`, llama.cpp alone embeds a part of `texts`, then the stack recalls the same
    part. This machine's speed moves within seconds: a floor measured minutes before its
    recalls (the seeding between) divided by the drift as much as by the floor."""
    lat: list[float] = []
    samples: list[dict[int, list[float]]] = []
    cpu: dict[str, float] = {}
    for part in slices(texts, rounds):
        samples.append(floor_samples(part))
        before = _stack_cpu(stack)
        lat += _timed(client, part)
        after = _stack_cpu(stack)
        for k, v in after.items():
            cpu[k] = cpu.get(k, 0.0) + v - before.get(k, 0.0)
    return lat, pooled_floor(samples), cpu


def _stack_cpu(stack: Any) -> dict[str, float]:
    """CPU seconds (user + system) so far of each part of a launched stack (every process under
    it, Postgres's backends in, by what its command line names), and of this process, the
    client asking, as `client`."""
    out: dict[str, float] = {}
    for p in psutil.Process(stack.proc.pid).children(recursive=True):
        try:
            cmd, t = " ".join(p.cmdline()), p.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        part = next((name for name in ("recall_api", "indexer", "embedder", "watchers")
                     if f"totalrecall_{name}" in cmd),
                    "postgres" if cmd.startswith("postgres") or "/postgres " in cmd
                    else "nats-server" if "nats-server" in cmd else "other")
        out[part] = out.get(part, 0.0) + t.user + t.system
    me = psutil.Process().cpu_times()
    return {**out, "client": me.user + me.system}


def cpu_per_recall(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    """ms of CPU per recall, by process, of the `n` recalls between two `_stack_cpu` reads."""
    return {k: 1000 * (after[k] - before.get(k, 0.0)) / n for k in after}


def cpu_bound_lines(what: str, per: dict[str, float], cpus: int, floor: Floor,
                    ) -> tuple[list[str], list[Figure]]:
    """What the stack's CPU per recall allows on this machine: no recall can be faster, on
    average, than its CPU spread over every core (the floor's p50 is the best of 1 and 2 threads,
    so it too may use both cores)."""
    total = sum(per.values())
    least = total / cpus
    parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
    lines = [f"{what}: CPU per recall {total:.1f} ms ({parts}); on {cpus} cores a recall takes "
             f"at least {least:.1f} ms on average = {least / floor.p50:.2f}× the floor's p50"]
    figures = [Figure(f"{what}: CPU per recall", total, "ms", {k: round(v, 2) for k, v in per.items()}),
               Figure(f"{what}: least mean ÷ floor p50 the CPU allows", least / floor.p50, "×",
                      {"cpus": cpus, "least ms": least, "floor p50 ms": floor.p50})]
    return lines, figures


def again_lines(what: str, again: tuple[list[float], dict[str, float]],
                cpu: dict[str, float] | None, floor: Floor, cpus: int
                ) -> tuple[list[str], list[Figure]]:
    """The questions asked a second time, their vectors (and their words' parse) cached in the
    recall API: what a recall costs besides embedding its question, and what that alone allows
    against the floor."""
    lat, per = again
    label = f"{what}, asked again (question vectors cached)"
    lines = [_line(label, lat)
             + f" = {statistics.median(lat) / floor.p50:.2f}× the floor's p50"]
    bound, figures = cpu_bound_lines(label, per, cpus, floor)
    lines += bound
    if cpu:
        lines.append(f"  a question asked the first time: {sum(cpu.values()) - sum(per.values()):.1f} "
                     f"ms more CPU per recall (the first pass less this one: its embedding, and "
                     f"the parse and counts of its words, which the second pass finds cached)")
    return lines, [Figure(f"{label}: p50", statistics.median(lat), "ms", {"n": len(lat)}),
                   Figure(f"{label}: p50 ÷ floor p50", statistics.median(lat) / floor.p50, "×",
                          {"floor p50 ms": floor.p50}), *figures]


def _line(what: str, lat: list[float]) -> str:
    return (f"{what}: p50 {statistics.median(lat):.1f} ms, p90 {_pct(lat, 0.9):.1f} ms, "
            f"p99 {_pct(lat, 0.99):.1f} ms, max {max(lat):.1f} ms")


def _report(lat: list[float], n: int, queries: int, metrics: str,
            prompt_lat: list[float] | None = None, prompt_metrics: str | None = None,
            spread: tuple[float, float] | None = None,
            floors: tuple[Floor, Floor | None] | None = None,
            cpu: dict[str, float] | None = None,
            again: tuple[list[float], dict[str, float]] | None = None,
            prompt_before: str | None = None) -> None:
    """`prompt_before`: the metrics just before the whole prompts were asked (default
    `metrics`), so their stage means count them alone."""
    print(describe())
    print(_line(f"automatic recall over HTTP, {n} memories, {queries} queries", lat))
    for stage, text in _stage_quantiles(metrics).items():
        print(f"  stage {stage:<11} mean {text}")
    emit(*_stage_figures(f"recall at {n} memories", metrics))
    if floors is not None:
        for line in ratio_lines(f"recall at {n} memories", lat, floors[0]):
            print(line)
        emit(*floor_ratios(f"recall at {n} memories", lat, floors[0]))
        if cpu:
            lines, figures = cpu_bound_lines(f"recall at {n} memories", cpu,
                                             len(os.sched_getaffinity(0)), floors[0])
            print(*lines, sep="\n")
            emit(*figures)
        if again is not None:
            lines, figures = again_lines(f"recall at {n} memories", again, cpu, floors[0],
                                         len(os.sched_getaffinity(0)))
            print(*lines, sep="\n")
            emit(*figures)
    if prompt_lat:
        sizes = sorted(len(q) for q in _prompts(len(prompt_lat)))
        print(_line(f"whole prompts instead ({len(prompt_lat)} of {sizes[0]}-{sizes[-1]} characters, "
                    f"median {sizes[len(sizes) // 2]})", prompt_lat))
        before = prompt_before if prompt_before is not None else metrics
        for stage, text in _stage_quantiles(prompt_metrics or "", before).items():
            print(f"  stage {stage:<11} mean {text}")
        emit(*_stage_figures(f"recall of whole prompts at {n} memories", prompt_metrics or "",
                             before))
        if floors is not None and floors[1] is not None:
            for line in ratio_lines(f"recall of whole prompts at {n} memories", prompt_lat,
                                    floors[1]):
                print(line)
            emit(*floor_ratios(f"recall of whole prompts at {n} memories", prompt_lat, floors[1]))
        if spread is not None:
            print(f"  query embedding: {spread[0]:.0f} long prompts on its parallel threads, "
                  f"{spread[1]:.0f} on one (something else was running)")


def _running_stack(args: argparse.Namespace, rng: random.Random) -> int:
    """Measure a stack that is already up at `args.url`, seeding through the ingest API."""
    n = args.n if args.n is not None else 2_000
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    with httpx.Client(base_url=args.url, timeout=60, headers=headers) as client:
        before = client.get("/memory/stats", params={"namespace": args.namespace}).json()
        seed_s = _seed_via_ingest(client, n, args.days, args.namespace, rng)
        wait_s = _wait_indexed(args.url, n, timeout=3600, namespace=args.namespace,
                               headers=headers)
        print(f"seeded {n} memories through POST /memory/ingest into namespace "
              f"{args.namespace!r} (had {before.get('total', 0)}): ingest {seed_s:.1f}s, "
              f"searchable after {seed_s + wait_s:.1f}s")
        print(_wait_built(args.url, headers=headers))
        print(_wait_quiet())
        lat = _measure(client, args.queries, args.namespace)
        metrics = client.get("/metrics").text  # the stages of the short questions alone
        prompt_lat = _measure_prompts(client, args.prompts, args.namespace)
        prompt_metrics = client.get("/metrics").text
    _report(lat, n, args.queries, metrics, prompt_lat, prompt_metrics)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=None,
                    help="memories to seed (default 20000; 2000 with --url)")
    ap.add_argument("--url", nargs="?", const="http://127.0.0.1:8765", default=None,
                    help="measure the running stack at URL (default http://127.0.0.1:8765) "
                         "instead of launching one; seeds through the ingest API")
    ap.add_argument("--token", default=os.environ.get("TR_RECALL_API_TOKEN"),
                    help="bearer token for --url (default $TR_RECALL_API_TOKEN)")
    ap.add_argument("--namespace", default="bench", help="namespace seeded and queried with --url")
    ap.add_argument("--days", type=float, default=30.0, help="spread of event times")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--prompts", type=int, default=60,
                    help="recalls with whole agent prompts (42-800 tokens), reported apart (0: none)")
    ap.add_argument("--optimize", action="store_true",
                    help="build the HNSW index (POST /memory/compact) before measuring")
    args = ap.parse_args(argv)
    rng = random.Random(7)
    if args.url:
        return _running_stack(args, rng)
    args.n = args.n if args.n is not None else 20_000
    questions = [ALL_QUERIES[i % len(ALL_QUERIES)] for i in range(args.queries)]
    with tempfile.TemporaryDirectory(prefix="tr-bench-") as tmp, \
            launched_stack(Path(tmp) / "home", extra_env={
                # Re-check the HNSW index often, so the measurement runs on a complete index.
                "TR_INDEXER_OPTIMIZE_INTERVAL_S": "5",
                "TR_INDEXER_OPTIMIZE_MAX_DELAY_S": "5"} if args.optimize else None) as stack:
        api = stack.api
        seed_s = asyncio.run(_seed(stack.nats_url, Topology(), args.n, args.days, rng))
        wait_s = _wait_indexed(api, args.n, timeout=3600)
        print(f"seeded {args.n} memories over {args.days:.0f} days: publish {seed_s:.1f}s, "
              f"indexed {args.n / (seed_s + wait_s):.0f}/s ({seed_s + wait_s:.1f}s total)")
        if args.optimize:
            t = time.perf_counter()
            httpx.post(f"{api}/memory/compact", json={}, timeout=7200)
            while True:  # the HNSW build runs in the indexer's background: wait for it
                tiers = httpx.get(f"{api}/memory/stats", timeout=30).json()["index"]["tiers"]
                if all(t_["index_completeness"] >= 0.99 for t_ in tiers.values()):
                    break
                if time.perf_counter() - t > 3600:
                    raise TimeoutError(f"HNSW build incomplete after an hour: {tiers}")
                time.sleep(5)
            print(f"compact + HNSW build: {time.perf_counter() - t:.1f}s")
        stats = httpx.get(f"{api}/memory/stats", timeout=30).json()
        print(f"tiers: {stats.get('by_tier')}; index: {stats.get('index', {}).get('tiers')}")
        print(_wait_built(api))
        print(_wait_quiet())
        with httpx.Client(base_url=api, timeout=30) as client:
            _warm_up(client)
            # The floor, llama.cpp alone embedding the very texts asked, in rounds between
            # the recalls' (`_interleaved`).
            lat, floor, spent = _interleaved(client, stack, questions)
            cpu = cpu_per_recall({}, spent, len(lat))
            metrics = client.get("/metrics").text  # the stages of the short questions alone
            # The same questions again: the recall API has their vectors (and their words' parse)
            # now, so this pass costs all a recall does but embedding its question (what the
            # floor measures).
            cpu1 = _stack_cpu(stack)
            again_lat = _timed(client, questions)
            again = (again_lat, cpu_per_recall(cpu1, _stack_cpu(stack), len(again_lat)))
            prompt_before = client.get("/metrics").text  # the prompts' stages counted alone
            prompt_lat, prompt_floor, _ = _interleaved(client, stack, _prompts(args.prompts)) \
                if args.prompts else ([], None, {})
            prompt_metrics = client.get("/metrics").text
            floors = (floor, prompt_floor)
        emb = httpx.get(f"http://127.0.0.1:{stack.ports['embedder']}/metrics", timeout=30).text
        # Spread by the embedder's query thread, or by the recall API's own query model.
        names = (("totalrecall_embedder_query_spread_total", emb),
                 ("totalrecall_recall_query_spread_total", prompt_metrics))
        spread = (sum(_counter(m, n, outcome="spread") for n, m in names),
                  sum(_counter(m, n, outcome="busy") for n, m in names))
    _report(lat, args.n, args.queries, metrics, prompt_lat, prompt_metrics, spread, floors, cpu,
            again, prompt_before)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
