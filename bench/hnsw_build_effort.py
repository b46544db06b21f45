"""HNSW build effort (`ef_construction`) of a tier: what a build costs and what searches find.

Embeds machine log lines and conversation turns from the eval data
(`eval.datasets.default_data_dir`) plus the sustained-load row's events with the packaged model,
fills a tier's collection (the indexer's schema) with all but the held-out queries, builds it,
writes `--increment` more and builds again (what the hot tier does under ingest), then compares
each query's 40 nearest found by HNSW (ef 128, as the indexer searches) with the exact ones.
Figures per value: CPU seconds of both builds (one build thread, as the indexer runs it),
recall@10 and @40, CPU per search. Usage:

    python -m bench.hnsw_build_effort [--texts 20000] [--efc 200 100 64] [--tier hot warm]
        [--vectors cache.npy]

The embeddings take most of the time (about a minute per 3,000 texts on two cores); `--vectors`
keeps them in a file for the next run.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import random
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.machine import describe

QUERIES = 900
TOPK, EF = 40, 128


def corpus(n: int) -> list[str]:
    """Up to `n` distinct texts: log lines, conversation turns, the row's service events."""
    from eval.datasets import default_data_dir
    from tests.chaos.load_client import event

    data = default_data_dir()
    texts: list[str] = []
    for name in ("HDFS", "OpenSSH", "Spark"):
        with open(data / "logqa" / f"{name}_2k.log_structured.csv", encoding="utf-8") as fh:
            texts += [row["Content"] for row in csv.DictReader(fh)]
    with gzip.open(data / "longmemeval" / "longmemeval_s_dev.jsonl.gz", "rt") as fh:
        for line in fh:
            for session in json.loads(line)["haystack_sessions"]:
                texts += [turn["content"][:400] for turn in session]
            if len(texts) > n:
                break
    rng = random.Random(3)
    texts += [e["summary"] + " " + e["detail"] for e in (event("n", rng) for _ in range(n // 4))]
    unique = list(dict.fromkeys(texts))
    rng.shuffle(unique)
    return unique[:n]


def embed(texts: list[str]) -> np.ndarray:
    from totalrecall.paths import default_model_path
    from totalrecall_worker.llama_model import LlamaBackend

    model = default_model_path()
    if not model.is_file():
        sys.exit(f"no model at {model}: run `totalrecall model build`")
    backend = LlamaBackend(model, n_threads=2)
    out: list[list[float]] = []
    for i in range(0, len(texts), 32):
        out += backend.embed(texts[i:i + 32])
    backend.close()
    return np.asarray(out, dtype=np.float32)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(vectors: np.ndarray, tier: str, efc: int, increment: int) -> dict[str, float]:
    import zvec
    from totalrecall_indexer.api import (
        OUTPUT_FIELDS,
        QUANTIZE,
        VECTOR,
        ZDoc,
        collection_schema,
        init_zvec,
        to_doc,
    )

    init_zvec(1)
    docs, queries = vectors[:-QUERIES], vectors[-QUERIES:]
    first = len(docs) - increment
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tr-efc-") as tmp:
        col = zvec.create_and_open(f"{tmp}/{tier}", collection_schema(
            tier, vectors.shape[1], QUANTIZE[tier], ef_construction=efc))

        def build(a: int, b: int, label: str) -> None:
            for s in range(a, b, 1024):
                col.upsert([to_doc(ZDoc(key=f"k{i}", vector=docs[i].tolist(), namespace="n",
                                        category="c", subcategory="", severity="info", ts_ms=i,
                                        id=f"e{i}", summary=""))
                            for i in range(s, min(b, s + 1024))])
            c0 = _cpu()
            col.optimize(zvec.OptimizeOption(concurrency=1))
            figures[label] = _cpu() - c0

        build(0, first, f"build of {first} (s)")
        build(first, len(docs), f"build of +{increment} (s)")
        exact = np.argsort(-(queries @ docs.T), axis=1)[:, :TOPK]
        param = zvec.HnswQueryParam(ef=EF, is_using_refiner=QUANTIZE[tier] is not None)
        r10 = r40 = 0.0
        c0 = _cpu()
        for q, truth in zip(queries, exact, strict=True):
            res = col.query(zvec.Query(VECTOR, vector=q.tolist(), param=param), topk=TOPK,
                            filter="namespace = 'n'", output_fields=OUTPUT_FIELDS)
            found = [int(d.id[1:]) for d in res]
            r10 += len(set(found[:10]) & set(truth[:10].tolist())) / 10
            r40 += len(set(found) & set(truth.tolist())) / TOPK
        figures["search (ms)"] = 1000 * (_cpu() - c0) / len(queries)
        figures["recall@10"], figures["recall@40"] = r10 / len(queries), r40 / len(queries)
        col.close()
    return figures


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--texts", type=int, default=20_000)
    p.add_argument("--increment", type=int, default=6_000)
    p.add_argument("--efc", type=int, nargs="+", default=[200, 100, 64])
    p.add_argument("--tier", nargs="+", default=["hot", "warm"])
    p.add_argument("--vectors", type=Path, help="a .npy of embeddings: read, or written")
    args = p.parse_args()
    print(describe(), flush=True)
    if args.vectors and args.vectors.is_file():
        vectors = np.load(args.vectors)
    else:
        vectors = embed(corpus(args.texts))
        if args.vectors:
            np.save(args.vectors, vectors)
    if len(vectors) < QUERIES + args.increment + 1000:
        sys.exit(f"{len(vectors)} vectors: too few for {QUERIES} queries and the increment")
    print(f"{len(vectors) - QUERIES} documents, {QUERIES} held-out queries, topk {TOPK}, "
          f"ef {EF}", flush=True)
    for tier in args.tier:
        for efc in args.efc:
            figures = measure(vectors, tier, efc, args.increment)
            print(f"{tier:5s} ef_construction {efc:4d}: "
                  + ", ".join(f"{k} {v:.4f}" if k.startswith("recall") else f"{k} {v:.2f}"
                              for k, v in figures.items()), flush=True)


if __name__ == "__main__":
    main()
