"""Embedder benchmark: raw llama.cpp throughput vs the service end to end through NATS (and the
overhead of the service in %), query latency while ingest runs, and re-ingest through the
embedding cache.

Runs the real embedder service (`python -m totalrecall_embedder`, its own process, as `make run`
starts it) with the real GGUF against a real nats-server (started in a temporary directory unless
--nats-url is given), with a fresh temporary $TOTALRECALL_HOME (a cold embedding cache). Texts are
synthetic sentences of ~30–45 tokens, all different (dedup is off, so every event is embedded).

The ratios come from interleaved rounds (`--rounds`, 5): llama.cpp alone on every core, then the
service on fresh texts, then queries idle and under ingest, each round within seconds. A machine
whose speed drifts during the run then moves a round's floor and its service alike: the ingest
ratio is the median round's, the query latencies are pooled.

    .venv/bin/python bench/embedder_bench.py                  # ~1 minute on 2 cores
    .venv/bin/python bench/embedder_bench.py --n 1000 --threads 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.embedder_stack import bench_model, connect_bus, embedder_process, nats_and_home
from bench.ratios import Ratio, emit

WORDS = [
    "disk", "memory", "swap", "nginx", "postgres", "kernel", "chrome", "backup", "cron",
    "firewall", "ssh", "user", "editor", "network", "wifi", "battery", "update", "package",
    "service", "timeout", "latency", "cache", "index", "query", "socket", "certificate",
    "docker", "container", "journal", "error", "warning", "restart", "config", "login",
    "process", "thread", "queue", "build", "compile", "python", "rust", "gpu", "fan",
    "temperature",
]
TEMPLATES = [
    "The {a} on host {h} reported {b} problems after the {c} upgrade and {d} kept failing",
    "User asked why the {a} is slow; we found {b} pressure caused by {c} and {d} together",
    "{a} service restarted {n} times in a row because {b} could not reach the {c} {d}",
    "Decided to move {a} to a new {b} so that {c} stops competing with {d} for resources",
]


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]


def texts(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return [rnd.choice(TEMPLATES).format(a=rnd.choice(WORDS), b=rnd.choice(WORDS),
                                         c=rnd.choice(WORDS), d=rnd.choice(WORDS),
                                         h=f"h{rnd.randint(1, 99)}", n=rnd.randint(2, 9))
            + f" ({rnd.choice(WORDS)} {rnd.choice(WORDS)})" for _ in range(n)]


QUESTIONS = [
    "why is the {a} so slow", "what happened to {a} on h{n}", "when did {a} last fail",
    "is {a} still restarting", "what did I decide about {a} and {b}",
    "how do I fix the {a} {b} error",
]


def questions(n: int, seed: int) -> list[str]:
    """Short, all-different questions (~8-12 tokens), as agents ask recall."""
    rnd = random.Random(seed)
    return [rnd.choice(QUESTIONS).format(a=rnd.choice(WORDS), b=rnd.choice(WORDS),
                                         n=rnd.randint(1, 99)) + f" ({i})" for i in range(n)]


RAW_BATCHES = (1, 8, 32, 64)


def bench_raw(model: Path, threads: int, n: int) -> dict[str, float]:
    from totalrecall_worker.llama_model import LlamaBackend

    b = LlamaBackend(model, n_threads=threads)
    data = texts(n, 1)
    b.embed(data[:4])  # warm up
    out: dict[str, float] = {}
    for bs in RAW_BATCHES:
        t0 = time.perf_counter()
        for i in range(0, n, bs):
            b.embed(data[i:i + bs])
        out[f"batch {bs}"] = n / (time.perf_counter() - t0)
    lat = []
    for t in questions(50, 1):
        t0 = time.perf_counter()
        b.embed([t])
        lat.append((time.perf_counter() - t0) * 1000)
    out["query p50 ms"] = pct(lat, 50)
    out["query p99 ms"] = pct(lat, 99)
    out["tokens/text"] = statistics.mean(b.count_tokens(t) for t in data[:50])
    b.close()
    return out


def _core_worker(model: str, data: list[str], barrier: Any, out: Any) -> None:
    from totalrecall_worker.llama_model import LlamaBackend

    b = LlamaBackend(Path(model), n_threads=1)
    b.embed(data[:2])
    barrier.wait()
    t0 = time.perf_counter()
    for i in range(0, len(data), 32):
        b.embed(data[i:i + 32])
    out.put((len(data), time.perf_counter() - t0))
    b.close()


def bench_every_core(model: Path, n: int, seed: int = 1) -> dict[str, float]:
    """llama.cpp alone on every core, on ingest texts (`seed`): one single-thread process per
    core (started together) and one process with a thread per core; texts/s of each."""
    import multiprocessing as mp

    from totalrecall_worker.llama_model import LlamaBackend

    cores = os.cpu_count() or 1
    data = texts(n * cores, seed)
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(cores), ctx.Queue()
    procs = [ctx.Process(target=_core_worker, args=(str(model), data[i::cores], barrier, out))
             for i in range(cores)]
    for p in procs:
        p.start()
    done = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    per_process = sum(k for k, _ in done) / max(s for _, s in done)
    b = LlamaBackend(model, n_threads=cores)
    b.embed(data[:4])
    t0 = time.perf_counter()
    for i in range(0, n, 32):
        b.embed(data[i:i + 32])
    threaded = n / (time.perf_counter() - t0)
    b.close()
    return {f"{cores} processes x 1 thread": per_process, f"1 process x {cores} threads": threaded}


def ratios(raw_all: dict[str, float], svc: dict[str, Any]) -> tuple[Ratio, Ratio]:
    """Ingest ÷ llama.cpp alone on every core (the median round's when the service figures come
    from interleaved rounds), query p99 under full ingest ÷ idle."""
    best = max(raw_all.values())
    idle, busy = svc["query idle p99 ms"], svc["query under ingest p99 ms"]
    ingest = svc.get("ingest ratio median", svc["service texts/s"] / best)
    raw: dict[str, Any] = {"service texts/s": svc["service texts/s"],
                           "llama.cpp alone on every core texts/s": best}
    if "ingest ratio per round" in svc:
        raw["per round"] = [round(v, 3) for v in svc["ingest ratio per round"]]
    return (Ratio("embedder: ingest ÷ llama.cpp alone on every core", ingest, 0.8, ">=", raw),
            Ratio("embedder: query p99 under full ingest ÷ idle", busy / idle, 1.5, "<=",
                  {"query under ingest p99 ms": busy, "query idle p99 ms": idle}))


def ratio_lines(raw_all: dict[str, float], svc: dict[str, Any]) -> list[str]:
    """The figures as ratios to the hardware, beside their targets."""
    ingest, query = ratios(raw_all, svc)
    best = ingest.raw["llama.cpp alone on every core texts/s"]
    idle, busy = query.raw["query idle p99 ms"], query.raw["query under ingest p99 ms"]
    rounds = ingest.raw.get("per round")
    how = (f"median of {len(rounds)} rounds ({', '.join(f'{v:.2f}' for v in rounds)}), "
           f"its round's floor {best:.1f} texts/s" if rounds else f"{best:.1f} texts/s")
    return [f"  ingest ÷ llama.cpp alone on every core ({how}): {ingest.value:.2f}× "
            f"(target ≥ 0.8×: {'met' if ingest.met else 'not met'})",
            f"  query p99 under full ingest ÷ idle ({busy:.1f} / {idle:.1f} ms): "
            f"{query.value:.2f}× (target ≤ 1.5×: {'met' if query.met else 'not met'})"]


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")


@dataclass
class Round:
    """One round of the interleaved measurement: llama.cpp alone on every core, then the service
    on fresh texts, then queries idle and under ingest, all within seconds of each other."""

    floor: dict[str, float]
    service: float
    idle: list[float]
    busy: list[float]

    @property
    def best_floor(self) -> float:
        return max(self.floor.values())


def summarise(rounds: list[Round]) -> tuple[dict[str, float], dict[str, Any]]:
    """(the floor, the service figures) over `rounds`: the ingest ratio is the median of each
    round's service ÷ floor (a machine whose speed drifts between rounds moves both alike), the
    query latencies are pooled over the rounds (idle and busy blocks alternate)."""
    per_round = [r.service / r.best_floor for r in rounds]
    mid = statistics.median(per_round)
    # The round whose ratio is the median stands for the floor and rate printed beside it.
    rep = rounds[per_round.index(min(per_round, key=lambda v: abs(v - mid)))]
    idle = [x for r in rounds for x in r.idle]
    busy = [x for r in rounds for x in r.busy]
    svc: dict[str, Any] = {
        "query idle p50 ms": pct(idle, 50), "query idle p99 ms": pct(idle, 99),
        "service texts/s": rep.service,
        "query under ingest p50 ms": pct(busy, 50), "query under ingest p99 ms": pct(busy, 99),
        "queries during ingest": len(busy),
        "ingest ratio per round": per_round, "ingest ratio median": mid}
    return dict(rep.floor), svc


async def bench_service(nats_url: str, model: Path, threads: int, query_threads: int,
                        n: int, home: Path, rounds: int = 5, raw_n: int = 160
                        ) -> tuple[list[Round], dict[str, Any]]:
    """`rounds` interleaved rounds (`Round`), then the figures measured once: an event's latency
    through an idle pipeline, the mean batch size, re-ingest through the cache."""
    import httpx
    from totalrecall_schema import EmbedRequest, MemoryEvent
    from totalrecall_schema.publish import publish_event

    bus = await connect_bus(nats_url, "bench", durable="bench")
    nc, js, topo, sub = bus.nc, bus.js, bus.topo, bus.embedded
    settings = bus.embedder_settings(model, n_threads=str(threads),
                                     query_n_threads=str(query_threads))

    async def drain(expected: int, timeout: float) -> int:
        got, deadline = 0, time.monotonic() + timeout
        while got < expected and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):  # nats.errors.TimeoutError is a subclass
                got += len(await sub.fetch(256, timeout=0.5))
        return got

    async def publish(batch: list[str], tag: str) -> None:
        for i, t in enumerate(batch):
            ev = MemoryEvent(id=f"{tag}-{i}", category="system.process", summary=t)
            await publish_event(js, topo, ev)

    async def query(text: str) -> float:
        t0 = time.perf_counter()
        await nc.request(topo.rpc_embed_query, EmbedRequest(texts=[text]).model_dump_json()
                         .encode(), timeout=30)
        return (time.perf_counter() - t0) * 1000

    async def ingesting() -> bool:
        ci = await js.consumer_info(topo.events_stream, topo.embedder_durable)
        return bool(ci.num_pending or ci.num_ack_pending)

    out: dict[str, Any] = {}
    done: list[Round] = []
    per_block = -(-200 // rounds)  # 200 queries idle and 200 under ingest in all
    fresh = iter(questions(2 * per_block * rounds + 1, 6))  # all different: no LRU answers
    with embedder_process(settings, home) as base:
        await query(next(fresh))
        for r in range(rounds):
            # llama.cpp alone on every core, with the service loaded and idle beside it
            floor = await asyncio.to_thread(bench_every_core, model, raw_n, 100 + r)
            idle = [await query(next(fresh)) for _ in range(per_block)]

            # ingest throughput end to end, on texts no round embedded before
            data = texts(n, 200 + r)
            t0 = time.perf_counter()
            pub = asyncio.create_task(publish(data, f"bulk{r}"))
            got = await drain(n, 120)
            rate = got / (time.perf_counter() - t0)
            await pub

            # query latency while the embedder works through a backlog (published first, so
            # that the bench's own publishing and draining do not delay its queries), sized to
            # outlast this round's queries at the rate just measured
            data2 = texts(max(n, int(rate * 15 / rounds)), 300 + r)
            await publish(data2, f"wave{r}")
            busy: list[float] = []
            while len(busy) < per_block and await ingesting():
                busy.append(await query(next(fresh)))
                await asyncio.sleep(0.02)
            await drain(len(data2), 120)
            done.append(Round(floor, rate, idle, busy))

        # single event latency (publish → EmbeddedEvent on the stream), idle pipeline
        single = []
        for i, t in enumerate(texts(10, 4)):
            t0 = time.perf_counter()
            await publish([t], f"single{i}")
            await drain(1, 10)
            single.append((time.perf_counter() - t0) * 1000)
        out["event latency idle p50 ms"] = pct(single, 50)
        async with httpx.AsyncClient() as client:
            metrics = (await client.get(f"{base}/metrics")).text
        total = _metric(metrics, "totalrecall_embedder_batch_size_sum")
        count = _metric(metrics, "totalrecall_embedder_batch_size_count")
        out["mean batch size"] = total / count if count else float("nan")

        # re-ingest of the first round's texts (new ids): served by the embedding cache
        data = texts(n, 200)
        t0 = time.perf_counter()
        pub3 = asyncio.create_task(publish(data, "again"))
        got = await drain(n, 120)
        out["re-ingest (cache) texts/s"] = got / (time.perf_counter() - t0)
        await pub3
        async with httpx.AsyncClient() as client:
            out["device"] = (await client.get(f"{base}/health")).json()["device"]
    await nc.close()
    return done, out


def overhead(raw: dict[str, float], svc: dict[str, Any]) -> list[str]:
    """Service throughput vs raw llama.cpp at the batch size the service really used and at
    its largest batch."""
    lines = []
    mean = svc["mean batch size"]
    near = min(RAW_BATCHES, key=lambda b: abs(b - mean))
    for bs in dict.fromkeys((near, RAW_BATCHES[-1])):
        r = raw[f"batch {bs}"]
        lines.append(f"  vs raw batch {bs:<3d} ({r:6.1f} texts/s): service reaches "
                     f"{100 * svc['service texts/s'] / r:5.1f} %, overhead "
                     f"{100 * (1 - svc['service texts/s'] / r):5.1f} %")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=400, help="events per ingest wave")
    p.add_argument("--raw-n", type=int, default=160, help="texts per raw batch-size run")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--query-threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5,
                   help="interleaved rounds of floor, ingest and queries (ratios of one moment)")
    p.add_argument("--nats-url")
    p.add_argument("--model", type=Path)
    args = p.parse_args()

    from bench.machine import describe

    model = bench_model(args.model)
    print(describe())
    print(f"model {model.name}, ingest threads {args.threads}, query threads "
          f"{args.query_threads}")
    t0 = time.perf_counter()
    raw = bench_raw(model, args.threads, args.raw_n)
    print("raw llama.cpp (LlamaBackend.embed):")
    for k, v in raw.items():
        print(f"  {k:28s} {v:8.1f}" + ("" if "ms" in k or "tokens" in k else " texts/s"))
    with nats_and_home(args.nats_url) as (url, home):
        rounds, once = asyncio.run(bench_service(url, model, args.threads, args.query_threads,
                                                 args.n, home, args.rounds, args.raw_n))
    raw_all, svc = summarise(rounds)
    device = once.pop("device")
    svc.update(once)
    print("llama.cpp alone on every core (the ingest floor), then the service, per round:")
    for i, r in enumerate(rounds, 1):
        floor = ", ".join(f"{k} {v:.1f}" for k, v in r.floor.items())
        print(f"  round {i}: floor {floor} texts/s; service {r.service:.1f} texts/s "
              f"= {r.service / r.best_floor:.2f}×; query p99 idle {pct(r.idle, 99):.1f} ms, "
              f"under ingest {pct(r.busy, 99):.1f} ms")
    print(f"service through NATS (events stream → embedder → embedded stream), device {device}"
          f" (the median round's rate; queries pooled over the rounds):")
    for k, v in svc.items():
        if isinstance(v, list) or k == "ingest ratio median":
            continue
        print(f"  {k:28s} {v:8.1f}" + (" texts/s" if "texts/s" in k else ""))
    print("service overhead (cold cache, end to end vs raw llama.cpp):")
    print("\n".join(overhead(raw, svc)))
    print("as ratios to the hardware (same run):")
    print("\n".join(ratio_lines(raw_all, svc)))
    emit(*ratios(raw_all, svc))
    print(f"done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
