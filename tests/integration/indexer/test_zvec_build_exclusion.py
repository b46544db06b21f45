"""zvec 0.8 hangs when an HNSW build starts while queries of the same collection are in flight
or an upsert takes a collection's write lock while queries of it are in flight (seen under
sustained load: the indexer stopped for good, 0 % CPU, the writer waiting on the collection's
write lock and the queries inside zvec's query pool; without the exclusion this hung at the
fourth build). With `BuildExclusion`, queries hammering a tier while it is written to and built
again and again never hang: a search during a build goes without the tier at once
(TierBuilding), searches between builds answer."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from totalrecall_indexer.adapters.zvec_schema import ZDoc
from totalrecall_indexer.adapters.zvec_tiers import TierBuilding, ZvecTiers
from waiting import wait_for_sync

BUILDS = 6
BUILD_TIMEOUT_S = 60.0


def _docs(rng: np.random.Generator, n: int, base: int) -> list[ZDoc]:
    v = rng.standard_normal((n, 384)).astype("float32")
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return [ZDoc(key=f"k{base + i}", vector=v[i].tolist(), namespace="ns",
                 category="system.service", subcategory="x", severity="info",
                 ts_ms=1_700_000_000_000 + base + i, id=f"i{base + i}", summary="s")
            for i in range(n)]


def test_searches_never_hang_a_build_of_their_tier(tmp_path: Path) -> None:
    # In a child process: a hang inside zvec cannot be interrupted (nor the process exit).
    # It imports `waiting` from tests/ as the tests do.
    tests = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (tests, os.environ.get("PYTHONPATH")) if p)}
    try:
        done = subprocess.run([sys.executable, __file__, str(tmp_path)], capture_output=True,
                              text=True, timeout=BUILDS * BUILD_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"a build hung under queries: {exc.stdout!r}") from None
    assert done.returncode == 0, done.stdout + done.stderr
    assert "builds done" in done.stdout


def _hammer(tmp_path: Path) -> None:
    tiers = ZvecTiers(tmp_path / "zvec", default_dim=384, optimize_threads=1)
    tiers.open()
    rng = np.random.default_rng(1)
    tiers.upsert("hot", _docs(rng, 2000, 0))
    answered, skipped, errors = [0], [0], []
    stop = threading.Event()

    def query() -> None:
        q = np.random.default_rng(2).standard_normal(384).astype("float32").tolist()
        while not stop.is_set():
            try:
                t0 = time.monotonic()
                hits = tiers.search("hot", q, 10, "namespace = 'ns'", 128, False)
                answered[0] += 1
                assert len(hits) == 10
            except TierBuilding:
                skipped[0] += 1
                # going without the tier is immediate, never behind the build
                assert time.monotonic() - t0 < 5.0
            except Exception as exc:  # surfaced by the main thread
                errors.append(exc)
                return

    written = [0]

    def write() -> None:  # small upserts beside the queries, as ingest does
        wrng = np.random.default_rng(3)
        n = 0
        while not stop.is_set():
            tiers.upsert("hot", _docs(wrng, 20, 1_000_000 + n))
            n += 20
            written[0] = n

    threads = [threading.Thread(target=query, daemon=True) for _ in range(4)]
    threads.append(threading.Thread(target=write, daemon=True))
    for t in threads:
        t.start()
    try:
        base = 2000
        for i in range(BUILDS):
            tiers.upsert("hot", _docs(rng, 500, base))
            base += 500
            before = answered[0]
            # queries in flight when the build starts
            wait_for_sync(lambda before=before: answered[0] >= before + 20, timeout=30,
                          interval=0.01, what="searches answering between builds",
                          context=lambda: f"answered {answered[0]}")
            built = threading.Event()

            def build(built: threading.Event = built) -> None:
                tiers.optimize("hot")
                built.set()

            threading.Thread(target=build, daemon=True).start()
            assert built.wait(BUILD_TIMEOUT_S), f"build {i} hung under queries"
            print(f"build {i}: {answered[0]} answered, {skipped[0]} went without the tier",
                  flush=True)
        assert not errors, errors
        assert skipped[0] > 0  # some searches came during a build and went without the tier
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert tiers.stats()["hot"]["doc_count"] == base + written[0]
    print("builds done", flush=True)


if __name__ == "__main__":
    _hammer(Path(sys.argv[1]))
