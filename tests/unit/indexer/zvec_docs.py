"""Zvec documents for the indexer's unit tests: `unit_docs(a, b)` are keys k<a>…k<b-1> with
unit vectors of their own (seeded by `a`)."""

from __future__ import annotations

import numpy as np
from totalrecall_indexer.adapters.zvec_schema import ZDoc

DIM = 384


def unit_docs(start: int, stop: int) -> list[ZDoc]:
    rng = np.random.default_rng(start)
    out = []
    for i in range(start, stop):
        v = rng.normal(size=DIM)
        out.append(ZDoc(key=f"k{i}", vector=[float(x) for x in v / np.linalg.norm(v)],
                        namespace="default", category="c", subcategory="s", severity="info",
                        ts_ms=1_700_000_000_000 + i, id=f"e{i}", summary=f"memory {i}"))
    return out
