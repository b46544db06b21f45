"""The indexer's memory (RSS/PSS) while its hot tier grows past the in-memory copy's limit,
in-process, without the stack.

What the sustained-load row does to the indexer, in small: events of one namespace upserted into
the hot tier in batches (in pool threads, as `asyncio.to_thread` runs them), one exact or HNSW
search of the hot tier per few events (`Searcher`'s call: linear while the tier holds at most
`linear_max_docs`), an HNSW build every `--build-every` new docs once past that limit
(`TierMaintenance.optimize_due`). The copy (`adapters/vector_mirror.py`) is on with
`--mirror-max N` (also the linear limit, as `bootstrap` sets it, unless `--linear-max` says
otherwise) and off with 0. Prints the process's PSS every few samples (one per
`--sample-every` docs) and the mean PSS of the samples' thirds (the row's growth check compares
them), how often `_mirror_load` ran, glibc's mmap threshold at the end (`mmap_threshold_kb`:
freeing a large block raises it for the whole process) and what `malloc_trim(0)` gives back
(freed, kept by the allocator). Usage:

    python -m bench.indexer_memory [--docs 100000] [--mirror-max 20000] [--linear-max N]

Run with `MALLOC_MMAP_THRESHOLD_=131072` in the environment to pin glibc's threshold.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from bench.machine import describe

DIM = 384


def _mb(n: float) -> float:
    return round(n / 1e6, 1)


def _mem() -> dict[str, float]:
    m = psutil.Process().memory_full_info()
    return {"rss_mb": _mb(m.rss), "pss_mb": _mb(m.pss)}


def _malloc_trim() -> None:
    ctypes.CDLL("libc.so.6").malloc_trim(0)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def mmap_threshold_kb() -> int:
    """glibc's mmap threshold now, in KiB (within a factor 1.25): the smallest malloc it
    serves with a memory map of its own. glibc raises it to the size of the largest mapped
    block freed; malloc below it comes from heaps that keep what is freed. (The probe's own
    free raises it to about where it was found.)"""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    size = 64 * 1024
    while size < 64 * 1024 * 1024:
        before = libc.mallinfo2().hblks
        ptr = libc.malloc(size)
        mapped = libc.mallinfo2().hblks > before
        libc.free(ptr)
        if mapped:
            return size // 1024
        size = size * 5 // 4
    return -1


def run(docs: int, mirror_max: int, linear_max: int | None = None, batch: int = 25,
        search_every: int = 4, build_every: int = 2000, sample_every: int = 1000, threads: int = 6,
        trim_every: int = 0, trim_at_drop: bool = False, seed: int = 1) -> dict[str, Any]:
    from totalrecall_indexer.api import TierFilter, ZDoc, ZvecTiers

    linear_max = mirror_max if linear_max is None else linear_max
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(500, DIM)).astype(np.float32)
    flt = TierFilter(namespace="ns0")
    loads = {"n": 0}
    samples: list[dict[str, float]] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tr-mem-") as tmp, \
            ThreadPoolExecutor(threads) as pool:
        tiers = ZvecTiers(Path(tmp) / "zvec", mirror_max_docs=mirror_max)
        real_load = tiers._mirror_load

        def counted_load(tier: str) -> None:
            loads["n"] += 1
            real_load(tier)

        tiers._mirror_load = counted_load  # type: ignore[method-assign]
        tiers.open()
        samples.append({"docs": 0, **_mem()})

        def search(vec: list[float]) -> None:
            linear = tiers.doc_count("hot") <= linear_max
            tiers.search("hot", vec, 40, flt, 128, linear)

        written = since_build = 0
        had_copy = False
        while written < docs:
            n = min(batch, docs - written)
            # As the embedder hands them over: Python float lists from JSON.
            vecs = centres[rng.integers(0, 500, n)] + 0.35 * rng.normal(size=(n, DIM))
            chunk = [ZDoc(key=f"k{written + j}", vector=vecs[j].tolist(), namespace="ns0",
                          category="system.service", subcategory="", severity="error",
                          ts_ms=1_700_000_000_000 + written + j, id=f"e{written + j}",
                          summary=f"nginx.service failed: exit code {written + j} " * 3)
                     for j in range(n)]
            qs = [(centres[rng.integers(0, 500)] + 0.5 * rng.normal(size=DIM)).tolist()
                  for _ in range(max(1, n // search_every))]
            wait([pool.submit(tiers.upsert, "hot", chunk),
                  *(pool.submit(search, q) for q in qs)])
            before = written
            written += n
            since_build += n
            if written > linear_max and since_build >= build_every:
                pool.submit(tiers.optimize, "hot").result()
                since_build = 0
            if trim_at_drop and had_copy and "hot" not in tiers._mirrors:
                _malloc_trim()
            had_copy = "hot" in tiers._mirrors
            if trim_every and written // trim_every != before // trim_every:
                _malloc_trim()
            if written // sample_every != before // sample_every:
                samples.append({"docs": written, **_mem(),
                                "mirror_docs": len(tiers._mirrors.get("hot") or ()),
                                "loads": loads["n"], "s": round(time.monotonic() - t0)})
                if written % (5 * sample_every) < n:
                    print(json.dumps(samples[-1]), flush=True)
        end = _mem()
        threshold = mmap_threshold_kb()
        _malloc_trim()
        trimmed = _mem()
        tiers.close()
    pss = [s["pss_mb"] for s in samples[1:]]
    third = max(1, len(pss) // 3)
    thirds = [round(float(np.mean(p)), 1)
              for p in (pss[:third], pss[third: len(pss) - third], pss[len(pss) - third:])]
    return {"docs": docs, "mirror_max": mirror_max, "linear_max": linear_max,
            "mirror_loads": loads["n"], "pss_thirds_mean_mb": thirds, "pss_max_mb": max(pss),
            "samples": samples, "end": end, "mmap_threshold_kb": threshold,
            "after_malloc_trim": trimmed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--mirror-max", type=int, default=20_000,
                    help="the copy's limit and the linear-search limit (0: copy off)")
    ap.add_argument("--linear-max", type=int, default=None,
                    help="exact searches and no HNSW build up to this many docs "
                         "(default: --mirror-max)")
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--build-every", type=int, default=2000)
    ap.add_argument("--sample-every", type=int, default=1000)
    ap.add_argument("--trim-every", type=int, default=0,
                    help="malloc_trim(0) every N docs (0: only at the end)")
    ap.add_argument("--trim-at-drop", action="store_true",
                    help="malloc_trim(0) once the copy has been dropped")
    args = ap.parse_args()
    print(describe(), flush=True)
    out = run(args.docs, args.mirror_max, args.linear_max, batch=args.batch,
              build_every=args.build_every, sample_every=args.sample_every,
              trim_every=args.trim_every, trim_at_drop=args.trim_at_drop)
    print(json.dumps({k: v for k, v in out.items() if k != "samples"}))


if __name__ == "__main__":
    main()
