"""CPU per exact search of the hot tier: zvec's linear scan against the tier's in-memory mirror
(`services/indexer/totalrecall_indexer/adapters/vector_mirror.py`), on the same collection.

Builds a hot tier (fp32) of N clustered 384-d vectors spread over K namespaces, then for each
size times 200 searches (topk 40, a namespace filter) both ways in CPU time of this process
(zvec's query threads included), checks that both return the same keys, and reports the
mirror's load time and size. Usage:

    python -m bench.exact_search_cpu [--docs 5000 10000 20000] [--spaces 1 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from bench.machine import describe


def _measure(n: int, spaces: int, queries: int = 200) -> dict[str, float]:
    from totalrecall_indexer.api import TierFilter, ZDoc, ZvecTiers

    rng = np.random.default_rng(n + spaces)
    centres = rng.normal(size=(500, 384)).astype(np.float32)
    vecs = centres[rng.integers(0, 500, n)] + 0.35 * rng.normal(size=(n, 384)).astype(np.float32)
    with tempfile.TemporaryDirectory(prefix="tr-exact-") as tmp:
        tiers = ZvecTiers(Path(tmp) / "zvec", mirror_max_docs=0)  # filled without a mirror
        tiers.open()
        for i in range(0, n, 1000):
            tiers.upsert("hot", [ZDoc(
                key=f"k{j}", vector=vecs[j].tolist(), namespace=f"ns{j % spaces}",
                category="system.service", subcategory="", severity="error",
                ts_ms=1_700_000_000_000 + j, id=f"e{j}", summary=f"nginx.service failed {j}")
                for j in range(i, min(n, i + 1000))])
        tiers.close()
        tiers = ZvecTiers(Path(tmp) / "zvec", mirror_max_docs=n)
        tiers.open()
        with tiers._tier_locks["hot"]:  # as a write would: load it again, alone
            c0 = time.process_time()
            tiers._mirror_load("hot")
            load_s = time.process_time() - c0
            tracemalloc.start()  # (slows the load down several times)
            tiers._mirror_load("hot")
            mirror_mb = tracemalloc.get_traced_memory()[0] / 1e6
            tracemalloc.stop()
        flt = TierFilter(namespace="ns0")
        qs = [(centres[rng.integers(0, 500)] + 0.5 * rng.normal(size=384)).tolist()
              for _ in range(queries)]
        out: dict[str, float] = {"docs": n, "namespaces": spaces,
                                 "mirror_load_cpu_s": round(load_s, 2),
                                 "mirror_mb": round(mirror_mb, 1)}
        answers: dict[str, list[list[str]]] = {}
        for label, f in (("zvec_linear", flt.zvec()), ("mirror", flt)):
            c0 = time.process_time()
            answers[label] = [[h.key for h in tiers.search("hot", q, 40, f, linear=True)]
                              for q in qs]
            out[f"{label}_cpu_ms"] = round((time.process_time() - c0) * 1000 / queries, 3)
        pairs = list(zip(*answers.values(), strict=True))
        out["same_keys"] = float(np.mean([a == b for a, b in pairs]))
        out["same_key_sets"] = float(np.mean([set(a) == set(b) for a, b in pairs]))
        # where they differ, how far apart the scores of the swapped docs are
        gaps = [abs(float(np.dot(vecs[int(x[1:])], qs[i]) / np.linalg.norm(vecs[int(x[1:])])
                          - np.dot(vecs[int(y[1:])], qs[i]) / np.linalg.norm(vecs[int(y[1:])]))
                    / np.linalg.norm(qs[i]))
                for i, (a, b) in enumerate(pairs) for x, y in zip(a, b, strict=True) if x != y]
        out["max_cosine_gap_where_they_differ"] = float(max(gaps, default=0.0))
        tiers.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[5000, 10000, 20000])
    ap.add_argument("--spaces", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    print(describe(), flush=True)
    for n in args.docs:
        for k in args.spaces:
            print(_measure(n, k), flush=True)


if __name__ == "__main__":
    main()
