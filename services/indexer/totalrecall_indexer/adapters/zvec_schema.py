"""What a Zvec tier holds: its documents (`ZDoc`, to and from zvec's `Doc`: `to_doc`, `from_doc`),
their collection schema (a quantized HNSW per tier), and zvec's process-wide settings."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import zvec
from totalrecall_worker.priority import call_lowered
from zvec import (
    CollectionSchema,
    DataType,
    Doc,
    FieldSchema,
    HnswIndexParam,
    InvertIndexParam,
    MetricType,
    QuantizeType,
    VectorSchema,
)

from ..core.store_types import TierDoc

VECTOR = "semantic"
OUTPUT_FIELDS = ["namespace", "category", "severity", "ts", "id", "summary"]
QUANTIZE: dict[str, Any] = {"hot": None, "warm": QuantizeType.INT8, "cold": QuantizeType.INT4}
#: HNSW `ef_construction` per tier. The hot tier is built again and again under sustained
#: ingest, its writes waiting meanwhile: with the lower value a build of diverse memories (logs,
#: conversations) costs about half as much CPU, and its searches found as many of the true
#: neighbours, within the spread between samples. The quantized tiers, built only when memories
#: move down, keep the higher one, which their searches needed
#: (docs/perf/2026-11-28-hot-tier-build-effort.md).
EF_CONSTRUCTION: dict[str, int] = {"hot": 100, "warm": 200, "cold": 200}
_init_lock = threading.Lock()
_initialised = False


def init_zvec(optimize_threads: int | None = None, build_nice: int = 0,
              build_idle: bool = False) -> None:
    """Process-wide zvec settings (first caller wins).

    zvec starts its worker threads here, and an HNSW build (`optimize()`) runs on them while
    queries and writes run on the caller's thread: started from a thread at `build_nice` (and
    under `SCHED_IDLE` with `build_idle`: `totalrecall_worker.priority`), they build that way,
    so that a build never takes a core from the searches of a recall (a build of a large tier
    keeps a core busy for seconds)."""
    global _initialised
    with _init_lock:
        if not _initialised:
            def init() -> None:
                with contextlib.suppress(Exception):  # already initialised in this process
                    zvec.init(log_level=zvec.LogLevel.WARN, optimize_threads=optimize_threads)
            call_lowered(init, build_nice, name="zvec-init", idle=build_idle)
            _initialised = True


#: A tier's document: the core's `TierDoc`, under the name the benchmarks know (`api.ZDoc`).
ZDoc = TierDoc


def to_doc(d: TierDoc) -> Doc:
    """zvec's `Doc` of a tier document."""
    return Doc(id=d.key, vectors={VECTOR: d.vector}, fields={
        "namespace": d.namespace, "category": d.category, "subcategory": d.subcategory,
        "severity": d.severity, "ts": d.ts_ms, "id": d.id, "summary": d.summary})


def from_doc(doc: Doc) -> TierDoc:
    """A tier document from what zvec returns."""
    f = doc.fields
    vec: Any = doc.vectors[VECTOR] if doc.vectors else []
    return TierDoc(key=doc.id, vector=[float(v) for v in vec], namespace=f["namespace"],
                   category=f["category"], subcategory=f.get("subcategory", ""),
                   severity=f["severity"],
                   ts_ms=int(f["ts"]), id=f["id"], summary=f["summary"])


def collection_schema(name: str, dim: int, quantize: Any, m: int = 16,
                      ef_construction: int | None = None) -> CollectionSchema:
    """A tier's schema; `ef_construction` defaults to the tier's (`EF_CONSTRUCTION`)."""
    if ef_construction is None:
        ef_construction = EF_CONSTRUCTION[name]
    kw = {} if quantize is None else {"quantize_type": quantize}
    return CollectionSchema(
        name=name,
        fields=[
            FieldSchema("namespace", DataType.STRING, index_param=InvertIndexParam()),
            FieldSchema("category", DataType.STRING, index_param=InvertIndexParam()),
            FieldSchema("subcategory", DataType.STRING),
            FieldSchema("severity", DataType.STRING, index_param=InvertIndexParam()),
            FieldSchema("ts", DataType.INT64,
                        index_param=InvertIndexParam(enable_range_optimization=True)),
            FieldSchema("id", DataType.STRING),
            FieldSchema("summary", DataType.STRING),
        ],
        vectors=[VectorSchema(VECTOR, DataType.VECTOR_FP32, dim, index_param=HnswIndexParam(
            metric_type=MetricType.COSINE, m=m, ef_construction=ef_construction, **kw))],
    )
