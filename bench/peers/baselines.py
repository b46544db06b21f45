"""The plain baselines of `make bench-peers`, in this process (nothing of Total Recall's services):

- SQLite FTS5: one table per run, the `porter unicode61` tokenizer, a query of the question's
  words ORed, ranked by FTS5's own `bm25()`;
- bm25s: Lucene BM25 (k1 1.5, b 0.75) with English stop words and Snowball stemming, the same
  configuration as `eval.bm25_baseline` (the BM25 row of docs/eval.md), one index per namespace;
- plain hybrid: what docs/eval.md's "0.7·cos + 0.3·min-max(BM25)" baseline row is, as a store:
  every memory embedded by llama.cpp with the same GGUF as our embedder, exact cosine over all of
  a namespace's vectors (numpy), the bm25s scores above min-max normalised, 0.7·cos + 0.3·BM25.

bm25s cannot add to an index: a namespace that got memories since its last index is re-indexed
by the next search (or flush), and write→searchable includes that.
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .workload import Doc

_WORD = re.compile(r"\w+", re.UNICODE)


def fts5_query(text: str) -> str:
    """The question's words, each quoted (FTS5 syntax characters are never operators), ORed."""
    words = dict.fromkeys(w.lower() for w in _WORD.findall(text))
    return " OR ".join(f'"{w}"' for w in words)


class SqliteFtsPeer:
    name = "SQLite FTS5"

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tr-peers-fts5-"))
        self.db: sqlite3.Connection | None = None
        self.config: dict[str, Any] = {
            "sqlite": sqlite3.sqlite_version, "tokenizer": "porter unicode61",
            "query": "the question's words ORed, ranked by bm25()", "file": "on disk, WAL"}

    def start(self) -> None:
        self.db = sqlite3.connect(self.dir / "fts.db", check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(body, ns UNINDEXED, id UNINDEXED, "
                        "tokenize='porter unicode61')")

    def _conn(self) -> sqlite3.Connection:
        if self.db is None:
            raise RuntimeError("SQLite FTS5: not started")
        return self.db

    def add(self, ns: str, docs: Sequence[Doc]) -> None:
        db = self._conn()
        db.executemany("INSERT INTO docs (body, ns, id) VALUES (?, ?, ?)",
                       [(d.text, ns, d.id) for d in docs])
        db.commit()

    def flush(self) -> None:
        pass

    def search(self, ns: str, query: str, k: int) -> list[str]:
        q = fts5_query(query)
        if not q:
            return []
        rows = self._conn().execute(
            "SELECT id FROM docs WHERE docs MATCH ? AND ns = ? ORDER BY bm25(docs), rowid LIMIT ?",
            (q, ns, k)).fetchall()
        return [str(r[0]) for r in rows]

    def pids(self) -> list[int]:
        return []           # run in baseline_adapter.py's process, whose memory is measured

    def stop(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


class _Bm25Index:
    """One namespace: its ids and texts, and a bm25s index of them built when first needed."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.retriever: Any = None
        self.stemmer: Any = None

    def add(self, docs: Sequence[Doc]) -> None:
        self.ids += [d.id for d in docs]
        self.texts += [d.text for d in docs]
        self.retriever = None

    def _tokens(self, texts: Sequence[str], ids: bool = True) -> Any:
        import bm25s
        import Stemmer

        if self.stemmer is None:
            self.stemmer = Stemmer.Stemmer("english")
        return bm25s.tokenize(list(texts), stopwords="en", stemmer=self.stemmer,
                              show_progress=False, return_ids=ids)

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every memory of the namespace for `query` (0 where no word is shared)."""
        import bm25s

        if not self.texts:
            return np.zeros(0, dtype=np.float32)
        if self.retriever is None:
            self.retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
            self.retriever.index(self._tokens(self.texts), show_progress=False)
        words = self._tokens([query], ids=False)[0]
        return np.asarray(self.retriever.get_scores(words), dtype=np.float32)


def top_ids(ids: Sequence[str], scores: np.ndarray, k: int, positive_only: bool) -> list[str]:
    if not len(scores):
        return []
    order = np.argsort(-scores, kind="stable")[:k]
    return [ids[int(i)] for i in order if not positive_only or scores[int(i)] > 0]


class Bm25sPeer:
    name = "bm25s"

    def __init__(self) -> None:
        import bm25s

        self.index: dict[str, _Bm25Index] = {}
        self.config: dict[str, Any] = {
            "bm25s": bm25s.__version__, "bm25": "lucene, k1 1.5, b 0.75",
            "tokens": "English stop words + Snowball stemming (as eval.bm25_baseline)",
            "index": "in memory, rebuilt after new memories (bm25s cannot add)"}

    def start(self) -> None:
        pass

    def add(self, ns: str, docs: Sequence[Doc]) -> None:
        self.index.setdefault(ns, _Bm25Index()).add(docs)

    def flush(self) -> None:
        for idx in self.index.values():
            idx.scores("warm")          # builds what is stale

    def search(self, ns: str, query: str, k: int) -> list[str]:
        idx = self.index.get(ns)
        if idx is None:
            return []
        return top_ids(idx.ids, idx.scores(query), k, positive_only=True)

    def pids(self) -> list[int]:
        return []

    def stop(self) -> None:
        self.index.clear()


def minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


class PlainHybridPeer:
    """0.7·cos + 0.3·min-max(BM25) over every memory of the namespace (docs/eval.md's baseline)."""

    name = "plain hybrid (0.7·cos + 0.3·BM25)"
    alpha = 0.7

    def __init__(self, model: Path, threads: int = 1, ingest_threads: int = 1,
                 n_ctx: int = 256) -> None:
        # ingest_threads 1: see EmbeddingsServer in systems.py (ggml's spinning threads on a busy
        # 2-core machine); 2 is what our embedder uses on a quiet one.
        self.model, self.n_ctx = model, n_ctx
        self.threads, self.ingest_threads = threads, ingest_threads
        self.llm: Any = None            # questions: 1 thread, like our embedder's query path
        self.llm_ingest: Any = None     # memories: every core, like our embedder's ingest
        self.bm25: dict[str, _Bm25Index] = {}
        self.vectors: dict[str, list[np.ndarray]] = {}
        self.matrix: dict[str, np.ndarray] = {}
        self.cache: dict[str, np.ndarray] = {}       # text -> vector: the latency corpus repeats
        self.config: dict[str, Any] = {
            "embedding": f"llama.cpp {model.name}, n_ctx {n_ctx}, questions on {threads} "
                         f"thread(s), memories on {ingest_threads}, normalised, one text a call, "
                         "cached by text",
            "vector search": "exact cosine over the namespace (numpy)",
            "bm25": "bm25s as the bm25s row", "fusion": "0.7·cos + 0.3·min-max(BM25), all memories"}

    def _llama(self, threads: int) -> Any:
        from llama_cpp import Llama

        return Llama(model_path=str(self.model), embedding=True, n_ctx=self.n_ctx,
                     n_batch=self.n_ctx, n_ubatch=self.n_ctx, n_threads=threads,
                     n_threads_batch=threads, verbose=False)

    def start(self) -> None:
        self.llm = self._llama(self.threads)
        self.llm_ingest = self._llama(self.ingest_threads)

    def _embed(self, text: str) -> np.ndarray:
        v = self.cache.get(text)
        if v is None:
            v = np.asarray(self.llm_ingest.embed(text, normalize=True, truncate=True),
                           dtype=np.float32).reshape(-1)
            self.cache[text] = v
        return v

    def add(self, ns: str, docs: Sequence[Doc]) -> None:
        self.bm25.setdefault(ns, _Bm25Index()).add(docs)
        self.vectors.setdefault(ns, []).extend(self._embed(d.text) for d in docs)
        self.matrix.pop(ns, None)

    def flush(self) -> None:
        for ns in self.bm25:
            self._matrix(ns)
            self.bm25[ns].scores("warm")

    def _matrix(self, ns: str) -> np.ndarray:
        m = self.matrix.get(ns)
        if m is None:
            vs = self.vectors.get(ns) or []
            m = self.matrix[ns] = (np.stack(vs) if vs else np.zeros((0, 384), np.float32))
        return m

    def search(self, ns: str, query: str, k: int) -> list[str]:
        idx = self.bm25.get(ns)
        if idx is None or not idx.ids:
            return []
        q = np.asarray(self.llm.embed(query, normalize=True, truncate=True),
                       dtype=np.float32).reshape(-1)
        score = self.alpha * (self._matrix(ns) @ q) + (1 - self.alpha) * minmax(idx.scores(query))
        return top_ids(idx.ids, score, k, positive_only=False)

    def pids(self) -> list[int]:
        return []

    def stop(self) -> None:
        self.llm = self.llm_ingest = None
        self.bm25.clear()
        self.vectors.clear()
        self.matrix.clear()
        self.cache.clear()
