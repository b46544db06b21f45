"""The embedder's state: the ingest and query backends, the dedup window, fallback handling."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .backend import EmbedBackend, LlamaBackend, ModelUnavailable
from .dedup import DedupWindow

log = logging.getLogger("totalrecall.embedder")

BackendFactory = Callable[[], EmbedBackend]


@dataclass
class EngineConfig:
    model_path: Path
    n_threads: int = 1
    query_n_threads: int = 1
    n_ctx: int = 256
    flash_attn: bool = True
    model_retry_s: float = 30.0
    dedup_enabled: bool = True
    dedup_window_s: float = 300.0
    dedup_max_entries: int = 20_000
    dedup_skip_categories: frozenset[str] = frozenset()
    rpc_batch_chunk: int = 64


class Engine:
    """Two backends with their own contexts: `ingest` (events, document RPC) and `query`
    (query RPC), so a query never waits behind an ingest batch. With no model both are None and
    the service runs degraded: events flow on without vectors, query RPCs get an error."""

    def __init__(self, config: EngineConfig, *, backend: EmbedBackend | None = None,
                 query_backend: EmbedBackend | None = None) -> None:
        self.config = config
        self.ingest: EmbedBackend | None = backend
        self.query: EmbedBackend | None = query_backend or backend
        self._injected = backend is not None
        self.error: str | None = None
        self._last_attempt = float("-inf")
        self._load_lock = asyncio.Lock()
        self.window = (DedupWindow(config.dedup_window_s, config.dedup_max_entries)
                       if config.dedup_enabled else None)

    # --- model lifecycle ----------------------------------------------------------------------
    @property
    def available(self) -> bool:
        return self.ingest is not None

    @property
    def fingerprint(self) -> str | None:
        return self.ingest.fingerprint if self.ingest is not None else None

    @property
    def dim(self) -> int | None:
        return self.ingest.dim if self.ingest is not None else None

    def _load_sync(self) -> tuple[EmbedBackend, EmbedBackend]:
        c = self.config
        ingest = LlamaBackend(c.model_path, n_threads=c.n_threads, n_ctx=c.n_ctx,
                              flash_attn=c.flash_attn)
        try:
            query = LlamaBackend(c.model_path, n_threads=c.query_n_threads, n_ctx=c.n_ctx,
                                 flash_attn=c.flash_attn, fingerprint=ingest.fingerprint)
        except Exception:
            ingest.close()
            raise
        return ingest, query

    async def load(self) -> bool:
        """Load the model (in a thread). False, with `error` set, when it is unavailable."""
        if self.available:
            return True
        async with self._load_lock:
            if self.available:
                return True
            self._last_attempt = time.monotonic()
            try:
                self.ingest, self.query = await asyncio.to_thread(self._load_sync)
            except ModelUnavailable as exc:
                self.error = str(exc)
                log.warning("embedding model unavailable, running degraded (no vectors): %s",
                            exc)
                return False
            self.error = None
            log.info("embedding model loaded: %s (%d dims)", self.fingerprint, self.dim)
            return True

    async def maybe_reload(self) -> None:
        """While degraded, look for the model again every `model_retry_s`."""
        if self.available or self._injected:
            return
        if time.monotonic() - self._last_attempt >= self.config.model_retry_s:
            await self.load()

    def close(self) -> None:
        for b in {id(b): b for b in (self.ingest, self.query) if b is not None}.values():
            b.close()
        self.ingest = self.query = None

    # --- embedding ----------------------------------------------------------------------------
    async def embed_ingest(self, texts: Sequence[str]) -> list[list[float] | None] | None:
        """Vectors for a batch of event texts; None without a model. A text the model fails on
        (after retrying it alone) gets None: the pipeline never stalls on one event."""
        backend = self.ingest
        if backend is None or not texts:
            return None
        try:
            vecs: list[list[float] | None] = list(
                await asyncio.to_thread(backend.embed, list(texts)))
            return vecs
        except Exception:
            log.exception("embedding a batch of %d failed; retrying one by one", len(texts))
        out: list[list[float] | None] = []
        for text in texts:
            try:
                out.append((await asyncio.to_thread(backend.embed, [text]))[0])
            except Exception:
                log.exception("embedding failed for one text; publishing it without a vector")
                out.append(None)
        return out

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        backend = self.query
        if backend is None:
            raise ModelUnavailable(self.error or "no embedding model loaded")
        return await asyncio.to_thread(backend.embed, list(texts))

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Bulk embedding on the ingest context, in chunks so ingest batches interleave."""
        backend = self.ingest
        if backend is None:
            raise ModelUnavailable(self.error or "no embedding model loaded")
        out: list[list[float]] = []
        step = max(1, self.config.rpc_batch_chunk)
        for i in range(0, len(texts), step):
            out.extend(await asyncio.to_thread(backend.embed, list(texts[i:i + step])))
        return out
