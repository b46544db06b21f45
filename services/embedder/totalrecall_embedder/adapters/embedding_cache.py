"""The embedding cache on disk, for documents (ingest, `rpc_embed_batch`); the queries' one is in
memory (`core/query_lru.py`).

The disk cache maps (model fingerprint, sha256 of the exact text the model saw, prefix
included) to the vector as little-endian float32. Vectors leave the backends rounded to 7
decimals; float32 keeps ~7.2 significant digits, so re-rounding a cached value to 7 decimals
gives back exactly the published number (|v| ≤ 1). One SQLite file (WAL), safe to share between
processes; bounded by `max_entries`, the least recently used rows are evicted first.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger("totalrecall.embedder")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    h BLOB NOT NULL,
    vec BLOB NOT NULL,
    used REAL NOT NULL,
    PRIMARY KEY (model, h)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_used ON vectors(used);
"""
_IN_CHUNK = 500  # host parameters per statement (SQLite's limit is ≥ 999)


def text_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def to_blob(vec: Sequence[float]) -> bytes:
    return np.asarray(vec, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> list[float]:
    return [round(float(x), 7) for x in np.frombuffer(blob, dtype="<f4")]


class EmbeddingCache:
    """Thread-safe (one connection behind a lock; the engine calls it from worker threads)."""

    def __init__(self, path: Path, max_entries: int = 100_000,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.max_entries = max(1, max_entries)
        self._clock = clock
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None,
                                   timeout=10.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last writes is fine
        self._db.executescript(_SCHEMA)
        self._count = int(self._db.execute("SELECT count(*) FROM vectors").fetchone()[0])
        self.hits = 0
        self.misses = 0
        self.evicted = 0

    def __len__(self) -> int:
        return self._count

    def get_many(self, model: str, texts: Sequence[str]) -> dict[int, list[float]]:
        """{index in `texts`: vector} for the texts cached under `model`; hits are touched."""
        if not texts:
            return {}
        hashes = [text_hash(t) for t in texts]
        found: dict[bytes, bytes] = {}
        unique = list(dict.fromkeys(hashes))
        now = self._clock()
        with self._lock:
            for i in range(0, len(unique), _IN_CHUNK):
                part = unique[i:i + _IN_CHUNK]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT h, vec FROM vectors WHERE model = ? AND h IN ({marks})",
                    (model, *part)).fetchall()
                found.update((bytes(h), bytes(v)) for h, v in rows)
            if found:  # touch the hits (one transaction)
                self._db.execute("BEGIN")
                try:
                    self._db.executemany(
                        "UPDATE vectors SET used = ? WHERE model = ? AND h = ?",
                        [(now, model, h) for h in found])
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        out = {i: from_blob(found[h]) for i, h in enumerate(hashes) if h in found}
        self.hits += len(out)
        self.misses += len(texts) - len(out)
        return out

    def put_many(self, model: str, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        if not items:
            return
        now = self._clock()
        rows = [(model, text_hash(t), to_blob(v), now) for t, v in items]
        with self._lock:
            before = self._db.total_changes
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT OR IGNORE INTO vectors (model, h, vec, used) VALUES (?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._count += self._db.total_changes - before
            if self._count > self.max_entries:
                self._evict()

    def _evict(self) -> None:
        """Down to 90 % of the bound, least recently used first (other processes may share the
        file: recount first)."""
        self._count = int(self._db.execute("SELECT count(*) FROM vectors").fetchone()[0])
        excess = self._count - int(self.max_entries * 0.9)
        if excess <= 0:
            return
        self._db.execute(
            "DELETE FROM vectors WHERE (model, h) IN "
            "(SELECT model, h FROM vectors ORDER BY used LIMIT ?)", (excess,))
        self._count -= excess
        self.evicted += excess
        log.info("embedding cache: evicted %d least recently used vectors", excess)

    def close(self) -> None:
        with self._lock:
            self._db.close()
