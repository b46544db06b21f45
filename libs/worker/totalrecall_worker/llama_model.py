"""A llama.cpp embedding model as the embedder and the recall API both run it.

The recall API embeds a question in its own process (no trip to the embedder: see its
`adapters/query_model.py`) with the very code the embedder's query RPC runs, so a vector is the
same whichever made it: the same model file and fingerprint, query prefix, cut to the query's
last tokens (`query_input`), normalisation and rounding. A test compares the two bit for bit.

`llama_cpp` is imported when a model is loaded, never at import time (the recall API runs
without it, embedding through the embedder).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("totalrecall.embedding")

#: Characters kept per text before tokenising (the model sees at most n_ctx tokens anyway;
#: this only bounds the tokeniser's work on 32 kB details).
MAX_TEXT_CHARS = 4_000


#: Characters a token may take at most when a text's tail is cut to a number of tokens: only
#: this many per token are tokenised (a WordPiece token is a word or less; a longer run of
#: letters is several tokens).
_TAIL_CHARS_PER_TOKEN = 16
#: A cut that lands inside a word moves on to the word's end when that is this close.
_WORD_SLACK = 24


def tail_tokens(text: str, limit: int, count: Callable[[str], int]) -> str:
    """The longest end of `text` that `count` (tokens, with the model's special tokens) puts at
    `limit` or fewer, starting at a word. `text` itself when it fits.

    A binary search on the start character, over the last `limit * 16` characters only, so a
    query of 8 kB costs a dozen tokenisations of a short string, not of the whole."""
    if limit <= 0 or count(text) <= limit:
        return text
    window = text[-limit * _TAIL_CHARS_PER_TOKEN:]
    lo, hi = 0, len(window)  # the first start whose tail fits (the empty tail always does)
    while lo < hi:
        mid = (lo + hi) // 2
        if count(window[mid:]) <= limit:
            hi = mid
        else:
            lo = mid + 1
    if lo > 0 and not window[lo - 1].isspace():  # landed inside a word: start at the next one
        nxt = next((i for i in range(lo, min(len(window), lo + _WORD_SLACK))
                    if window[i].isspace()), None)
        if nxt is not None:
            lo = nxt
    return window[lo:].lstrip()


class ModelUnavailable(RuntimeError):
    """The model file is missing or cannot be loaded."""


def model_fingerprint(path: Path) -> str:
    """`<file stem>:<sha256[:12]>`; the hash is cached in `<file>.sha256` (sha256sum format,
    also written by `totalrecall model build`) and recomputed when the model is newer."""
    cache = path.with_name(path.name + ".sha256")
    digest = None
    try:
        if cache.stat().st_mtime >= path.stat().st_mtime:
            first = cache.read_text().split()
            if first and len(first[0]) == 64:
                digest = first[0]
    except OSError:
        pass
    if digest is None:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        digest = h.hexdigest()
        try:
            cache.write_text(f"{digest}  {path.name}\n")
        except OSError as exc:  # read-only model dir: fine, just slower next start
            log.debug("cannot cache the model hash: %s", exc)
    return f"{path.stem}:{digest[:12]}"


def default_prefixes(model_name: str) -> tuple[str, str]:
    """(query prefix, document prefix) a model expects: nomic-embed models are trained with
    `search_query: ` / `search_document: `; the sentence-transformers models use none."""
    if "nomic" in model_name.lower():
        return "search_query: ", "search_document: "
    return "", ""


class LlamaBackend:
    """One `llama_cpp.Llama` context in embedding mode.

    n_ubatch == n_batch == llama n_ctx: BERT-style models run through llama.cpp's encoder, which
    needs a whole packed batch in one ubatch (a smaller ubatch SIGABRTs the process).
    Llama.embed() packs several texts per decode while their tokens fit n_batch and truncates
    each text to n_batch tokens, so no call can overrun it.

    `n_ctx` is the longest text in tokens (256 = sentence-transformers' truncation). `n_batch`
    (default `n_ctx`) may be larger, to pack more texts per decode (the GPU path); texts are then
    cut to `n_ctx` tokens here, before llama sees them. `n_gpu_layers=-1` offloads every layer.
    """

    def __init__(self, model_path: Path, *, n_threads: int = 1, n_ctx: int = 256,
                 n_batch: int | None = None, n_gpu_layers: int = 0, flash_attn: bool = True,
                 fingerprint: str | None = None) -> None:
        if not model_path.is_file():
            raise ModelUnavailable(f"model file not found: {model_path}")
        try:
            import llama_cpp
        except ImportError as exc:  # pragma: no cover - dependency of the package
            raise ModelUnavailable(f"llama_cpp is not importable: {exc}") from exc
        self.model_path = model_path
        self.model_name = model_path.name
        self._lock = threading.Lock()
        self.n_ctx = n_ctx
        self.n_batch = max(n_ctx, n_batch or n_ctx)
        self.n_gpu_layers = n_gpu_layers
        self.n_threads = n_threads
        self.device = "gpu" if n_gpu_layers else "cpu"
        try:
            self._llm: Any = llama_cpp.Llama(
                model_path=str(model_path), embedding=True, n_ctx=self.n_batch,
                n_batch=self.n_batch, n_ubatch=self.n_batch, n_gpu_layers=n_gpu_layers,
                flash_attn=flash_attn, n_threads=n_threads, n_threads_batch=n_threads,
                verbose=False)
        except Exception as exc:  # llama.cpp raises ValueError for a bad file
            raise ModelUnavailable(f"cannot load {model_path}: {exc}") from exc
        self.dim = int(self._llm.n_embd())
        self.fingerprint = fingerprint or model_fingerprint(model_path)

    def _fit(self, text: str) -> str:
        """The longest prefix of `text` of at most `n_ctx` tokens (binary search on characters:
        only long texts pay, ~12 tokenisations)."""
        tok = self._llm.tokenize
        if len(tok(text.encode("utf-8"))) <= self.n_ctx:
            return text
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(tok(text[:mid].encode("utf-8"))) <= self.n_ctx:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo]

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_on(texts, self.n_threads)

    def embed_on(self, texts: Sequence[str], n_threads: int) -> list[list[float]]:
        """`embed` with `n_threads` compute threads for this call only."""
        if not texts:
            return []
        cut = [t[:MAX_TEXT_CHARS] for t in texts]
        with self._lock:
            if self.n_batch > self.n_ctx:
                cut = [self._fit(t) for t in cut]
            if n_threads == self.n_threads:
                vecs = self._llm.embed(cut, normalize=False, truncate=True)
            else:
                import llama_cpp

                llama_cpp.llama_set_n_threads(self._llm.ctx, n_threads, n_threads)
                try:
                    vecs = self._llm.embed(cut, normalize=False, truncate=True)
                finally:
                    llama_cpp.llama_set_n_threads(self._llm.ctx, self.n_threads, self.n_threads)
        # Normalised and rounded in numpy: per-float Python here held the GIL for ~3 ms per
        # batch of 32, which a query thread back from llama.cpp had to wait out.
        arr = np.asarray(vecs, dtype=np.float64)
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        norms[norms == 0.0] = 1.0
        out: list[list[float]] = np.round(arr / norms, 7).tolist()
        return out

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._llm.tokenize(text[:MAX_TEXT_CHARS].encode("utf-8")))

    def close(self) -> None:
        with self._lock:
            llm, self._llm = self._llm, None
            if llm is not None:
                llm.close()


def query_input(text: str, prefix: str, limit: int, count: Callable[[str], int] | None) -> str:
    """What a query's embedding is made from: `prefix` and the end of `text` that fits in
    `limit` tokens with it (`tail_tokens`). What a prompt asks is at its end (a pasted log or
    context comes first), the model was trained on 128 tokens, and a query's embedding costs in
    proportion to its tokens (256 tokens: 330 ms on a 2 GHz Zen 1 core, against 18 ms for a
    short question); the keyword search still sees every word. `count` None (a remote backend
    counts nothing: its own limits apply) or `limit` 0: the whole text."""
    if limit <= 0 or count is None:
        return prefix + text
    return prefix + tail_tokens(text, limit, lambda s: count(prefix + s))
