"""CPU time each part of the stack spends per recall and per ingested event.

Starts the stack as `make run` does (the chaos suite's launcher), ingests `--events` machine
events in batches of 50, waits for the pipeline to drain, then runs `--recalls` recalls, 4 at a
time, and reads every process's CPU time (user + system) before and after each phase. CPU per
operation is what decides how much load a machine can take (the sustained-load row of
docs/reliability.md); unlike latency it barely depends on what else the machine runs, so two
commits can be compared on a shared machine. Usage:

    python -m bench.cpu_per_op [--events 2000] [--recalls 400] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

import psutil

from bench.machine import describe
from tests.chaos import load_client as load
from tests.chaos.stack_inputs import Stack, chaos_stack


def _per_op(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    return {k: round((after[k] - before[k]) * 1000 / n, 2) for k in before}


async def _round(stack: Stack, recalls: int, events: int) -> dict[str, object]:
    pids = load.service_pids(stack)
    rng = random.Random(7)
    ns = f"cpu-{uuid.uuid4().hex[:6]}"
    pool = load.Pool(stack.url, stack.headers, 8)
    latencies: list[float] = []

    async def recaller(n: int) -> None:
        for _ in range(n):
            start = time.perf_counter()
            await pool.post("/memory/recall", {"query": rng.choice(load.QUERIES), "namespace": ns,
                                               "maxResults": 6, "timeframe": "auto"})
            latencies.append((time.perf_counter() - start) * 1000)

    try:
        c0 = load.cpu_seconds(pids)
        for _ in range(events // 50):
            await pool.post("/memory/ingest", [load.event(ns, rng) for _ in range(50)])
        await asyncio.to_thread(load.drain_s, stack)
        c1 = load.cpu_seconds(pids)
        await asyncio.gather(*(recaller(recalls // 4) for _ in range(4)))
        c2 = load.cpu_seconds(pids)
    finally:
        await pool.close()
    per_event, per_recall = _per_op(c0, c1, events), _per_op(c1, c2, recalls)
    latencies.sort()
    return {"cpu_ms_per_event": round(sum(per_event.values()), 2), "per_event": per_event,
            "cpu_ms_per_recall": round(sum(per_recall.values()), 2), "per_recall": per_recall,
            "recall_p50_ms_4_at_once": round(latencies[len(latencies) // 2], 1),
            "loadavg_1m": round(psutil.getloadavg()[0], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--recalls", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print(describe(), flush=True)
    with tempfile.TemporaryDirectory(prefix="tr-cpu-") as tmp, chaos_stack(Path(tmp)) as stack:
        for _ in range(args.rounds):
            print(json.dumps(asyncio.run(_round(stack, args.recalls, args.events))), flush=True)


if __name__ == "__main__":
    main()
