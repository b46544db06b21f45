"""A question's embedding made in the recall API's process (its query model) vs the embedder's
query RPC through NATS, asked in turn, one question each way, idle and while the embedder
ingests a backlog, in interleaved rounds (idle, under ingest, idle, ...). nats-server, the
embedder and this process run in one session (one scheduler group, as a stack does), so that
neither path gets another group's share of the CPUs.

    .venv/bin/python -m bench.query_path                       # the embedder's defaults
    .venv/bin/python -m bench.query_path --threads 0 --ingest-idle

Prints each path's p50/p99 idle and under ingest, p99 under ingest ÷ idle (the target of
`embedder_bench.py`: ≤ 1.5×), and the texts/s ingested meanwhile
(docs/perf/2026-11-29-recall-floor.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.embedder_bench import texts
from bench.embedder_stack import bench_model, connect_bus, embedder_process, nats_and_home
from bench.floor import pct
from bench.machine import describe
from bench.ratios import Ratio, emit
from bench.recall_bench import ALL_QUERIES


async def run(url: str, model: Path, home: Path, args: argparse.Namespace) -> None:
    from totalrecall_schema import EmbedReply, EmbedRequest, MemoryEvent
    from totalrecall_worker.llama_model import LlamaBackend, default_prefixes, query_input

    bus = await connect_bus(url, "qp", durable="qp")
    nc, js, topo, sub = bus.nc, bus.js, bus.topo, bus.embedded
    settings = bus.embedder_settings(model, n_threads=str(args.threads),
                                     ingest_idle=str(args.ingest_idle).lower())
    salt = random.randrange(10**9)  # no cache anywhere has seen these questions
    questions = iter(f"{q} ({salt}-{i})" for i, q in enumerate(ALL_QUERIES * 10))
    res: dict[str, list[float]] = {f"{w} {p}": [] for p in ("idle", "ingest")
                                   for w in ("in process", "embedder RPC")}
    # What the recall API's query model does (`adapters/query_model.py`): the embedder's code
    # on one thread of its own, the event loop waiting.
    backend = LlamaBackend(model, n_threads=1)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="query-embed")
    prefix = default_prefixes(model.name)[0]

    async def local(text: str) -> list[float]:
        def embed() -> list[float]:
            return backend.embed_on([query_input(text, prefix, 128, backend.count_tokens)], 1)[0]
        return await asyncio.get_running_loop().run_in_executor(pool, embed)

    async def rpc(text: str) -> list[float]:
        msg = await nc.request(topo.rpc_embed_query,
                               EmbedRequest(texts=[text], kind="query").model_dump_json().encode(),
                               timeout=30)
        return EmbedReply.model_validate_json(msg.data).vectors[0]

    with embedder_process(settings, home):
        probe = next(questions)
        assert await local(probe) == await rpc(probe), "not the embedder's vectors"
        for _ in range(5):
            await rpc(next(questions))
            await local(next(questions))

        async def both(i: int, phase: str) -> None:
            order = [("in process", local), ("embedder RPC", rpc)]
            for name, embed in order if i % 2 else order[::-1]:
                t0 = time.perf_counter()
                await embed(next(questions))
                res[f"{name} {phase}"].append((time.perf_counter() - t0) * 1000)

        # Interleaved rounds: idle questions, then questions under a backlog published for the
        # round, drained before the next round's idle ones. This machine's speed moves within
        # seconds; blocks of each phase spread over the whole run compare like with like.
        per_round = -(-args.queries // args.rounds)
        wave, rates, short = args.n, [], 0
        for r in range(args.rounds):
            for i in range(per_round):
                await both(i, "idle")
                await asyncio.sleep(0.01)
            for i, text in enumerate(texts(wave, 2 + r)):
                ev = MemoryEvent(id=f"w{r}-{i}", category="system.process", summary=text)
                await js.publish(topo.events_subject(ev.category), ev.model_dump_json().encode(),
                                 headers={"Nats-Msg-Id": ev.key})
            t0, got = time.perf_counter(), 0

            async def drain(expected: int) -> None:
                nonlocal got
                while got < expected:
                    with contextlib.suppress(TimeoutError):
                        got += len(await sub.fetch(256, timeout=0.5))

            draining = asyncio.create_task(drain(wave))
            asked = 0
            # Every question of this phase is asked while the round's backlog is ingested.
            while not draining.done() and asked < per_round:
                await both(asked, "ingest")
                asked += 1
                await asyncio.sleep(0.02)
            rates.append(got / (time.perf_counter() - t0))
            short += per_round - asked
            if asked < per_round:  # the backlog ran out: a larger one for the next rounds
                wave *= 2
            await asyncio.wait_for(draining, 300)
        rate = statistics.median(rates)
        if short:
            print(f"  {short} questions under ingest not asked: a backlog ran out (raise --n)")
    pool.shutdown()
    backend.close()
    await nc.close()
    print(f"embedder ingest: {args.threads or 'every'} thread(s), SCHED_IDLE {args.ingest_idle}: "
          f"{rate:.1f} texts/s ingested (median of {args.rounds} rounds)")
    for key, xs in res.items():
        print(f"  {key:20s} p50 {statistics.median(xs):6.1f} ms  p99 {pct(xs, 0.99):6.1f} ms"
              f"  (n={len(xs)})")
    for w in ("in process", "embedder RPC"):
        busy, idle = res[f"{w} ingest"], res[f"{w} idle"]
        print(f"  {w}: p99 under ingest ÷ idle {pct(busy, 0.99) / pct(idle, 0.99):.2f}× "
              f"(target ≤ 1.5×), p50 {statistics.median(busy) / statistics.median(idle):.2f}×")
        emit(Ratio(f"query path, {w}: p99 under ingest ÷ idle",
                   pct(busy, 0.99) / pct(idle, 0.99), 1.5, "<=",
                   {"p99 under ingest ms": pct(busy, 0.99), "p99 idle ms": pct(idle, 0.99),
                    "n": len(busy), "ingested texts/s": rate}))
    a, b = res["in process idle"], res["embedder RPC idle"]
    print(f"  idle, embedder RPC ÷ in process: p50 {statistics.median(b) / statistics.median(a):.2f}×,"
          f" p99 {pct(b, 0.99) / pct(a, 0.99):.2f}×")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="the embedder's ingest threads (0: all)")
    p.add_argument("--ingest-idle", action="store_true", help="the embedder's ingest SCHED_IDLE")
    p.add_argument("--n", type=int, default=600,
                   help="events published per round as the backlog ingested while asking")
    p.add_argument("--rounds", type=int, default=5,
                   help="interleaved rounds of idle questions and questions under ingest")
    p.add_argument("--queries", type=int, default=200,
                   help="questions per path and phase (p99 of 200: the second largest)")
    args = p.parse_args()
    sys.setswitchinterval(0.0005)  # as the recall API does with its query model loaded
    model = bench_model()
    with open("/proc/loadavg") as f:
        print(describe(), "| load", f.read().strip())
    with nats_and_home() as (url, home):
        asyncio.run(run(url, model, home, args))
    with open("/proc/loadavg") as f:
        print("load after", f.read().strip())


if __name__ == "__main__":
    main()
