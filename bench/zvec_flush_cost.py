"""What a zvec `flush()` after every batch costs: the time per flush, the files it leaves, and what
those do to an exact scan of the tier (why the indexer does not flush each write).

One collection with flushes after each batch of 30 documents, one without, 6,000 documents each
(384-d, fp32 HNSW, not built), in a temporary folder:

    .venv/bin/python bench/zvec_flush_cost.py

Recorded: docs/perf/2026-11-29-disk-full.md.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import zvec
from zvec import (
    CollectionSchema,
    DataType,
    Doc,
    FieldSchema,
    HnswIndexParam,
    HnswQueryParam,
    MetricType,
    Query,
    VectorSchema,
)

DOCS, BATCH, SCANS = 6000, 30, 50


def measure(path: Path, flush: bool) -> dict[str, float]:
    schema = CollectionSchema(name="hot", fields=[FieldSchema("summary", DataType.STRING)],
                              vectors=[VectorSchema("semantic", DataType.VECTOR_FP32, 384,
                                                    index_param=HnswIndexParam(
                                                        metric_type=MetricType.COSINE))])
    col = zvec.create_and_open(str(path), schema)
    rng = np.random.default_rng(0)
    upserts, flushes = [], []
    for start in range(0, DOCS, BATCH):
        vecs = rng.random((BATCH, 384), dtype=np.float32)
        docs = [Doc(id=f"k{start + i}", vectors={"semantic": vecs[i].tolist()},
                    fields={"summary": "x" * 50}) for i in range(BATCH)]
        t0 = time.perf_counter()
        col.upsert(docs)
        upserts.append(time.perf_counter() - t0)
        if flush:
            t0 = time.perf_counter()
            col.flush()
            flushes.append(time.perf_counter() - t0)
    files = sum(len(f) for _d, _s, f in os.walk(path))
    q = rng.random(384, dtype=np.float32).tolist()
    t0 = time.perf_counter()
    for _ in range(SCANS):
        col.query(Query("semantic", vector=q, param=HnswQueryParam(ef=128, is_linear=True)),
                  topk=10)
    scan = (time.perf_counter() - t0) / SCANS
    col.close()
    return {"upsert ms (median)": 1000 * statistics.median(upserts),
            "flush ms (median)": 1000 * statistics.median(flushes) if flushes else 0.0,
            "files": files, "exact scan ms": 1000 * scan}


def main() -> None:
    zvec.init(log_level=zvec.LogLevel.WARN)
    with tempfile.TemporaryDirectory() as tmp:
        for flush in (False, True):
            got = measure(Path(tmp) / f"flush-{flush}", flush)
            print(("flush after each batch" if flush else "no flush") + ": "
                  + ", ".join(f"{k} {v:.1f}" for k, v in got.items()))


if __name__ == "__main__":
    main()
