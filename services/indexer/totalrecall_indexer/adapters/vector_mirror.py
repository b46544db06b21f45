"""An in-memory copy of a small zvec tier, for its exact searches.

zvec 0.8's exact scan (`HnswQueryParam(is_linear=True)`) spends most of an indexer's CPU per
recall, with or without a filter, and its cost is per document rather than the distance
arithmetic: the same cosine over a float32 matrix costs a fraction of it (see
docs/perf/2026-11-27-indexer-search-cpu.md). The mirror gives the same answer as that scan of
an fp32 tier (cosine distance of the normalised vectors, best first) over the same documents.
A quantized tier (warm: int8, cold: int4) is copied with the fp32 vectors zvec keeps beside its
codes, so its copy answers as that scan of the same documents in an fp32 tier would: exactly,
where zvec's own scan picks its candidates on the codes.

It is derived state: filled from the collection itself (`ZvecTiers` loads it at open and after
anything it cannot follow) and changed only by `ZvecTiers` after zvec accepted a write, with
the tier's writes and reads excluded (`BuildExclusion`). It is never written to disk.

Its arrays, and its temporaries of a vector per row, live in anonymous memory maps of their own
(`_mapped`), not in malloc's: glibc raises its mmap threshold to the size of the largest mapped
block freed (up to 32 MiB), and from then on serves every allocation below it, zvec's included,
from heaps that keep what is freed. The copy's arrays, regrown by half and dropped when the tier
outgrows it, were such blocks: the indexer kept growing after the copy was gone
(docs/perf/2026-11-27-indexer-memory.md). Per-row temporaries of a few bytes (masks, scores)
stay with numpy's malloc.
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..core.search import TierFilter
from ..core.store_types import RawHit
from .zvec_schema import ZDoc


def _mapped(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zeroed array in an anonymous private memory map of its own, unmapped when the array
    goes: given back to the system whole, without touching malloc's thresholds."""
    dt = np.dtype(dtype)
    count = int(np.prod(shape))
    buf = mmap.mmap(-1, max(count * dt.itemsize, 1), flags=mmap.MAP_PRIVATE)
    return np.frombuffer(buf, dtype=dt, count=count).reshape(shape)


def _take(arr: np.ndarray, rows: np.ndarray, capacity: int) -> np.ndarray:
    """`arr[rows]` in a mapped array of `capacity` rows (the rest zeros)."""
    out = _mapped((capacity, *arr.shape[1:]), arr.dtype)
    # mode="clip": "raise" would copy through a temporary buffer (rows are in range anyway).
    np.take(arr, rows, axis=0, out=out[: len(rows)], mode="clip")
    return out


#: Rows gathered at a time for a search of a few rows: each search thread's buffer of them is
#: kept, as a fresh map per search costs more in page faults than the gather itself.
_GATHER_ROWS = 256
_gather = threading.local()


def _gathered_sims(vecs: np.ndarray, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """`vecs[rows] @ q`, gathered through this thread's buffer (searches of one tier may run
    in several threads: `reads_per_tier`)."""
    buf = getattr(_gather, "buf", None)
    if buf is None or buf.shape[1] != vecs.shape[1]:
        buf = _gather.buf = _mapped((_GATHER_ROWS, vecs.shape[1]), vecs.dtype)
    sims = np.empty(len(rows), dtype=vecs.dtype)
    for start in range(0, len(rows), _GATHER_ROWS):
        part = rows[start: start + _GATHER_ROWS]
        np.take(vecs, part, axis=0, out=buf[: len(part)], mode="clip")
        np.einsum("ij,j->i", buf[: len(part)], q, out=sims[start: start + len(part)])
    return sims


class VectorMirror:
    """The tier's docs, one `_Space` per namespace: a search is always of one namespace (the
    recall API's), and scans that namespace's rows only."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._spaces: dict[str, _Space] = {}
        self._space_of: dict[str, str] = {}  # key -> namespace

    def __len__(self) -> int:
        return len(self._space_of)

    def upsert(self, docs: Iterable[ZDoc]) -> None:
        """As zvec's upsert: a key already present is replaced (in whichever namespace)."""
        for doc in docs:
            old = self._space_of.get(doc.key)
            if old is not None and old != doc.namespace:
                self._delete_from(old, doc.key)
            space = self._spaces.get(doc.namespace)
            if space is None:
                space = self._spaces[doc.namespace] = _Space(self.dim)
            space.upsert(doc)
            self._space_of[doc.key] = doc.namespace

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            ns = self._space_of.pop(key, None)
            if ns is not None:
                self._delete_from(ns, key)

    def _delete_from(self, ns: str, key: str) -> None:
        space = self._spaces[ns]
        space.delete(key)
        if not len(space):
            del self._spaces[ns]

    def search(self, vector: list[float], topk: int, flt: TierFilter | None) -> list[RawHit]:
        """The `topk` nearest docs matching `flt` by cosine distance, nearest first; among equal
        distances (copies of one text) the newer, then by key: the order `fuse_tier_hits` gives
        them (zvec's own order of ties is arbitrary)."""
        if topk <= 0:
            return []
        if flt is not None and flt.namespace is not None:
            space = self._spaces.get(flt.namespace)
            spaces = [] if space is None else [space]
        else:
            spaces = list(self._spaces.values())
        if not spaces:
            return []
        q = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        ranked = sorted(c for space in spaces for c in space.candidates(q, topk, flt))[:topk]
        return [RawHit(key=key, distance=1.0 + neg_sim, fields=dict(fields))
                for neg_sim, _ts, key, fields in ranked]


class _Space:
    """The docs of one namespace, as rows of arrays (a replaced or deleted doc's row is dead
    until the rows are compacted)."""

    def __init__(self, dim: int, capacity: int = 16) -> None:
        self._vecs = _mapped((capacity, dim), np.float32)
        self._ts = _mapped((capacity,), np.int64)
        # Strings as small ints: a filter compares codes, not Python strings per row.
        self._cat = _mapped((capacity,), np.int32)
        self._sev = _mapped((capacity,), np.int32)
        self._live = _mapped((capacity,), np.bool_)
        # A dead row's key is "" and its fields {} (searches see live rows only).
        self._fields: list[dict[str, Any]] = [{}] * capacity
        self._keys: list[str] = [""] * capacity
        self._row: dict[str, int] = {}
        self._codes: dict[str, int] = {}
        self._n = 0  # rows used, live or not

    def __len__(self) -> int:
        return len(self._row)

    def _code(self, value: str) -> int:
        return self._codes.setdefault(value, len(self._codes))

    def upsert(self, doc: ZDoc) -> None:
        old = self._row.pop(doc.key, None)
        if old is not None:
            self._drop_row(old)
        if self._n == len(self._live):
            self._resize(len(self._live) * 3 // 2)
        i = self._n
        vec = np.asarray(doc.vector, dtype=np.float32)
        norm = float(np.linalg.norm(vec))
        # zvec's cosine normalises both sides; a zero vector stays zero (distance 1).
        self._vecs[i] = vec / norm if norm > 0 else vec
        self._ts[i] = doc.ts_ms
        self._cat[i] = self._code(doc.category)
        self._sev[i] = self._code(doc.severity)
        self._live[i] = True
        self._fields[i] = {"namespace": doc.namespace, "category": doc.category,
                           "severity": doc.severity, "ts": doc.ts_ms, "id": doc.id,
                           "summary": doc.summary}
        self._keys[i] = doc.key
        self._row[doc.key] = i
        self._n += 1
        self._compact_if_sparse()

    def delete(self, key: str) -> None:
        row = self._row.pop(key, None)
        if row is not None:
            self._drop_row(row)
        self._compact_if_sparse()

    def _drop_row(self, row: int) -> None:
        self._live[row] = False
        self._fields[row] = {}
        self._keys[row] = ""

    def _compact_if_sparse(self) -> None:
        """Rows of replaced or deleted docs are dead weight in every scan: squeeze them out
        once they are as many as the live ones."""
        dead = self._n - len(self._row)
        if dead < 64 or dead < len(self._row):
            return
        keep = np.flatnonzero(self._live[: self._n])
        cap = len(self._live)
        self._vecs, self._ts = _take(self._vecs, keep, cap), _take(self._ts, keep, cap)
        self._cat, self._sev = _take(self._cat, keep, cap), _take(self._sev, keep, cap)
        self._live = _take(self._live, keep, cap)
        self._fields[: len(keep)] = [self._fields[i] for i in keep]
        self._keys[: len(keep)] = [self._keys[i] for i in keep]
        self._fields[len(keep): self._n] = [{}] * (self._n - len(keep))
        self._keys[len(keep): self._n] = [""] * (self._n - len(keep))
        self._n = len(keep)
        self._row = {k: i for i, k in enumerate(self._keys[: self._n])}

    def _resize(self, capacity: int) -> None:
        def grow(arr: np.ndarray) -> np.ndarray:
            out = _mapped((capacity, *arr.shape[1:]), arr.dtype)
            out[: len(arr)] = arr
            return out
        self._vecs, self._ts, self._cat = grow(self._vecs), grow(self._ts), grow(self._cat)
        self._sev, self._live = grow(self._sev), grow(self._live)
        extra = capacity - len(self._fields)
        self._fields += [{}] * extra
        self._keys += [""] * extra

    def _mask(self, flt: TierFilter | None) -> np.ndarray:
        n = self._n
        mask = self._live[:n].copy()
        if flt is None:
            return mask
        if flt.since_ms is not None:
            mask &= self._ts[:n] >= flt.since_ms
        if flt.until_ms is not None:
            mask &= self._ts[:n] <= flt.until_ms
        for col, values in ((self._cat, flt.categories), (self._sev, flt.severities)):
            if values is not None:
                codes = [self._codes[v] for v in values if v in self._codes]
                mask &= np.isin(col[:n], codes)
        return mask

    def candidates(self, q: np.ndarray, topk: int, flt: TierFilter | None,
                   ) -> list[tuple[float, int, str, dict[str, Any]]]:
        """(-similarity, -ts, key, fields) of this namespace's `topk` best rows matching `flt`
        (the unit query `q`), and of every row tied with the k-th."""
        rows = np.flatnonzero(self._mask(flt))
        if len(rows) == 0:
            return []
        # einsum, not `@`: OpenBLAS would spread this over every core and double its CPU time.
        if 2 * len(rows) >= self._n:  # most rows: a contiguous pass beats a gather
            sims = np.einsum("ij,j->i", self._vecs[: self._n], q)[rows]
        else:
            sims = _gathered_sims(self._vecs, rows, q)
        if len(rows) > topk:
            kth = np.partition(sims, len(sims) - topk)[len(sims) - topk]
            cand = np.flatnonzero(sims >= kth)
        else:
            cand = np.arange(len(rows))
        picked = rows[cand]
        return [(-sim, -ts, self._keys[row], self._fields[row]) for sim, ts, row
                in zip(sims[cand].tolist(), self._ts[picked].tolist(), picked.tolist(),
                       strict=True)]
