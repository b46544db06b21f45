"""The Zvec collections: hot (fp32 HNSW), warm (int8 HNSW), cold (int4 HNSW).

zvec is single-writer per process and its calls block: every method here is synchronous and is
meant to run in a worker thread. Queries and upserts may run concurrently (zvec allows it);
`optimize()` too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zvec
from zvec import (
    CollectionSchema,
    DataType,
    Doc,
    FieldSchema,
    HnswIndexParam,
    HnswQueryParam,
    InvertIndexParam,
    MetricType,
    QuantizeType,
    Query,
    VectorSchema,
)

from .search import TIERS

VECTOR = "semantic"
MAX_BATCH = 1024
MAX_EF = 2048
_OUTPUT_FIELDS = ["namespace", "category", "severity", "ts", "id", "summary"]
_QUANT: dict[str, Any] = {"hot": None, "warm": QuantizeType.INT8, "cold": QuantizeType.INT4}
log = logging.getLogger("totalrecall.indexer")
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.:@/+=-]{1,200}$")  # event ids: no quotes
_init_lock = threading.Lock()
_initialised = False


def _init_zvec(optimize_threads: int | None = None) -> None:
    """Process-wide zvec settings (first caller wins)."""
    global _initialised
    with _init_lock:
        if not _initialised:
            with contextlib.suppress(Exception):  # already initialised in this process
                zvec.init(log_level=zvec.LogLevel.WARN, optimize_threads=optimize_threads)
            _initialised = True


@dataclass
class ZDoc:
    key: str
    vector: list[float]
    namespace: str
    category: str
    subcategory: str
    severity: str
    ts_ms: int
    id: str
    summary: str

    def to_doc(self) -> Doc:
        return Doc(id=self.key, vectors={VECTOR: self.vector}, fields={
            "namespace": self.namespace, "category": self.category,
            "subcategory": self.subcategory, "severity": self.severity, "ts": self.ts_ms,
            "id": self.id, "summary": self.summary})

    @classmethod
    def from_doc(cls, doc: Doc) -> ZDoc:
        f = doc.fields
        vec: Any = doc.vectors[VECTOR] if doc.vectors else []
        return cls(key=doc.id, vector=[float(v) for v in vec], namespace=f["namespace"],
                   category=f["category"], subcategory=f.get("subcategory", ""),
                   severity=f["severity"],
                   ts_ms=int(f["ts"]), id=f["id"], summary=f["summary"])


@dataclass
class RawHit:
    key: str
    distance: float
    fields: dict[str, Any]


def collection_schema(name: str, dim: int, quantize: Any, m: int = 16,
                      ef_construction: int = 200) -> CollectionSchema:
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


class ZvecTiers:
    """Owns the three collections under `root` plus `meta.json` (dim, model fingerprint)."""

    def __init__(self, root: Path, default_dim: int = 384,
                 optimize_threads: int | None = None) -> None:
        self.root = Path(root)
        self.optimize_threads = optimize_threads
        self.default_dim = default_dim
        self.cols: dict[str, Any] = {}
        self.dim = default_dim
        self.model: str | None = None
        #: tier -> why it must be re-indexed (it could not be opened and was started empty);
        #: kept in meta.json until the re-index is done.
        self.reindex: dict[str, str] = {}
        self._meta_lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------
    @property
    def meta_path(self) -> Path:
        return self.root / "meta.json"

    def open(self) -> None:
        _init_zvec(self.optimize_threads)
        self.root.mkdir(parents=True, exist_ok=True)
        if self.meta_path.exists():
            meta = json.loads(self.meta_path.read_text())
            self.dim = int(meta.get("dim") or self.default_dim)
            self.model = meta.get("model")
            self.reindex = dict(meta.get("reindex") or {})
        else:
            self.dim, self.model, self.reindex = self.default_dim, None, {}
            self._write_meta()
        for tier in TIERS:
            path = self.root / tier
            if not path.exists():
                self.cols[tier] = self._create(tier)
                continue
            try:
                self.cols[tier] = zvec.open(str(path))
            except RuntimeError as exc:
                if "lock" in str(exc).lower():  # another process holds it: not ours to fix
                    raise
                self.cols[tier] = self._quarantine(tier, str(exc))

    def _create(self, tier: str) -> Any:
        return zvec.create_and_open(str(self.root / tier),
                                    collection_schema(tier, self.dim, _QUANT[tier]))

    def _quarantine(self, tier: str, reason: str) -> Any:
        """A collection zvec cannot open any more (seen after a kill inside `optimize()`, which
        rewrites a segment's RocksDB column families in place): move it aside, start the tier
        empty and record that it must be re-indexed (from Postgres, re-embedding)."""
        broken = self.root / f"{tier}.broken-{time.time_ns()}"
        os.replace(self.root / tier, broken)
        log.error("zvec collection %s cannot be opened (%s): moved to %s, starting it empty; "
                  "its memories are re-indexed from Postgres", tier, reason, broken.name)
        self.reindex[tier] = f"{reason} (moved to {broken.name})"
        self._write_meta()
        return self._create(tier)

    def reindexed(self, tier: str) -> None:
        with self._meta_lock:
            if self.reindex.pop(tier, None) is not None:
                self._write_meta()

    def close(self) -> None:
        for col in self.cols.values():
            with contextlib.suppress(Exception):
                col.close()
        self.cols.clear()

    def _write_meta(self) -> None:
        tmp = self.meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"dim": self.dim, "model": self.model,
                                   "reindex": self.reindex}))
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, self.meta_path)

    def reset(self, dim: int, model: str | None) -> None:
        """Drop every collection and start empty with this dim/model (rebuild, model change)."""
        self.close()
        for tier in TIERS:
            shutil.rmtree(self.root / tier, ignore_errors=True)
        self.dim, self.model, self.reindex = dim, model, {}
        self._write_meta()
        self.open()

    # --- model fingerprint -----------------------------------------------------------------
    def total_docs(self) -> int:
        return sum(int(c.stats.doc_count) for c in self.cols.values())

    def accept(self, model: str | None, dim: int) -> bool:
        """May vectors of (model, dim) go into these collections? The first embedded event
        fixes the model (and the dim, re-creating the empty collections if needed)."""
        with self._meta_lock:
            if self.model is None and self.total_docs() == 0:
                if dim != self.dim:
                    self.reset(dim, model)
                else:
                    self.model = model
                    self._write_meta()
                return True
            if self.model is None:  # docs exist but no fingerprint recorded: adopt it
                if dim != self.dim:
                    return False
                self.model = model
                self._write_meta()
                return True
            return model == self.model and dim == self.dim

    # --- writes ----------------------------------------------------------------------------
    def upsert(self, tier: str, docs: list[ZDoc]) -> int:
        col = self.cols[tier]
        n = 0
        for i in range(0, len(docs), MAX_BATCH):
            chunk = docs[i: i + MAX_BATCH]
            statuses = col.upsert([d.to_doc() for d in chunk])
            bad = [s for s in statuses if not s.ok()]
            if bad:
                raise RuntimeError(f"zvec upsert into {tier} failed: {bad[0].message()}")
            n += len(chunk)
        return n

    def delete(self, tier: str, keys: list[str]) -> int:
        """Delete keys from one tier; returns how many existed."""
        if not keys:
            return 0
        col = self.cols[tier]
        n = 0
        for i in range(0, len(keys), MAX_BATCH):
            statuses = col.delete(keys[i: i + MAX_BATCH])
            n += sum(1 for s in statuses if s.ok())
        return n

    def fetch_older(self, tier: str, cutoff_ms: int, limit: int = MAX_BATCH,
                    exclude_ids: Iterable[str] = ()) -> list[ZDoc]:
        """Up to `limit` docs of `tier` with ts < cutoff_ms, with their vectors; docs whose
        event id is in `exclude_ids` (pinned memories) are left out."""
        flt = f"ts < {int(cutoff_ms)}"
        excluded = sorted({i for i in exclude_ids if _SAFE_ID.match(i)})
        if excluded:
            flt += " and id NOT IN (" + ", ".join(f"'{i}'" for i in excluded) + ")"
        res = self.cols[tier].query(filter=flt, topk=limit, include_vector=True)
        return [ZDoc.from_doc(d) for d in res]

    def fetch(self, tier: str, keys: list[str]) -> dict[str, ZDoc]:
        docs = self.cols[tier].fetch(keys, include_vector=True)
        return {k: ZDoc.from_doc(d) for k, d in docs.items()}

    def optimize(self, tier: str) -> None:
        self.cols[tier].optimize()

    def flush(self) -> None:
        for col in self.cols.values():
            col.flush()

    # --- reads -----------------------------------------------------------------------------
    def search(self, tier: str, vector: list[float], topk: int, filter: str | None,
               ef: int = 128) -> list[RawHit]:
        param = HnswQueryParam(ef=max(min(ef, MAX_EF), topk), is_using_refiner=tier != "hot")
        res = self.cols[tier].query(Query(VECTOR, vector=vector, param=param), topk=topk,
                                    filter=filter, output_fields=_OUTPUT_FIELDS)
        return [RawHit(key=d.id, distance=float(d.score), fields=dict(d.fields or {}))
                for d in res]

    def stats(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for tier, col in self.cols.items():
            st = col.stats
            out[tier] = {"doc_count": int(st.doc_count),
                         "index_completeness": float(st.index_completeness.get(VECTOR, 1.0))}
        return out

    def disk_bytes(self) -> dict[str, int]:
        out = {}
        for tier in TIERS:
            total = 0
            for dirpath, _dirs, files in os.walk(self.root / tier):
                for f in files:
                    with contextlib.suppress(OSError):
                        total += os.path.getsize(os.path.join(dirpath, f))
            out[tier] = total
        return out
