"""The embedder's state and its embedding: backends (ingest, query), the caches (documents on
disk, queries in memory), the dedup window, and which thread computes what. Loading the model
and the fallback chain are `loading.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from .backend import EmbedBackend, LlamaBackend, ModelUnavailable, default_prefixes, query_input
from .dedup import DedupWindow, TemplateVectors
from .device import ActiveDevice
from .loading import LocalFactory, ModelLoading, RemoteFactory, device_of, no_gpu, no_remote
from .priority import embedding_pool, foreign_runnable, machine_idle, usable_cpus
from .query_lru import QueryLRU

log = logging.getLogger("totalrecall.embedder")

#: on_cache(cache, hits, misses): cache is "disk" (documents) or "query" (in-memory LRU)
CacheHook = Callable[[str, int, int], None]
#: on_spread(spread): an exclusive query was spread over the parallel threads, or not (busy)
SpreadHook = Callable[[bool], None]
#: runnable(own): tasks running besides the caller and `own` of ours (None: unknown)
RunnableProbe = Callable[[int], "int | None"]
Kind = Literal["query", "document"]


class VectorCache(Protocol):
    """The documents' vectors cache (`adapters/embedding_cache.py`: SQLite), by model
    fingerprint and exact text."""

    def get_many(self, model: str, texts: Sequence[str]) -> dict[int, list[float]]: ...

    def put_many(self, model: str, items: Sequence[tuple[str, Sequence[float]]]) -> None: ...


@dataclass
class EngineConfig:
    model_path: Path
    #: threads of each ingest context (0: one context on every usable core)
    n_threads: int = 1
    #: ingest contexts, each on its own thread (0: one per `n_threads` usable cores; see
    #: `parallel.py`); one on the GPU
    ingest_workers: int = 0
    query_n_threads: int = 1
    n_ctx: int = 256
    flash_attn: bool = True
    model_retry_s: float = 30.0
    dedup_enabled: bool = True
    dedup_window_s: float = 300.0
    dedup_max_entries: int = 20_000
    dedup_skip_categories: frozenset[str] = frozenset()
    template_vectors_enabled: bool = True
    template_vectors_max_entries: int = 20_000
    rpc_batch_chunk: int = 64
    batch_max: int = 64
    # device
    device: str = "auto"
    gpu_n_batch: int = 2048
    gpu_batch_max: int = 256
    gpu_rpc_batch_chunk: int = 256
    # prefixes (None: automatic by model name)
    query_prefix: str | None = None
    document_prefix: str | None = None
    # remote fallback
    fallback_url: str | None = None
    fallback_model: str | None = None
    fallback_api_key: str | None = None
    fallback_timeout_s: float = 30.0
    query_cache_entries: int = 1024
    #: A query is embedded from its last this many tokens at most (0: up to n_ctx, from its start)
    query_max_tokens: int = 128
    #: Threads of an exclusive query (EmbedRequest.exclusive) while the machine is otherwise idle
    query_parallel_threads: int = 2
    #: nice value of the ingest embedding thread (0: same priority as queries)
    ingest_nice: int = 10
    #: the ingest thread under SCHED_IDLE (see `priority`)
    ingest_idle: bool = False


class Engine(ModelLoading):
    """Backends with their own contexts: `ingest` (events, document RPC, backfill), `query`
    (query RPC: a query never waits behind an ingest batch). With no model at all
    `ingest`/`query` are None and the service runs degraded: events flow on without vectors,
    query RPCs get an error."""

    def __init__(self, config: EngineConfig, *, backend: EmbedBackend | None = None,
                 query_backend: EmbedBackend | None = None,
                 local_factory: LocalFactory | None = None,
                 remote_factory: RemoteFactory | None = None,
                 gpu_probe: Callable[[], bool] | None = None,
                 cache: VectorCache | None = None,
                 on_cache: CacheHook | None = None,
                 on_spread: SpreadHook | None = None,
                 runnable: RunnableProbe | None = None) -> None:
        self.config = config
        self.ingest: EmbedBackend | None = backend
        self.query: EmbedBackend | None = query_backend or backend
        self._injected = backend is not None
        self.device: ActiveDevice = device_of(backend)
        self.device_reason = "injected backend" if backend is not None else "not loaded yet"
        self.error: str | None = None
        #: a GPU was asked for (device=cuda) or is usable (device=auto, GPU build)
        self.gpu_wanted = False
        self._local_factory: LocalFactory = local_factory or LlamaBackend
        self._remote_factory: RemoteFactory = remote_factory or no_remote
        self._gpu_probe = gpu_probe or no_gpu
        self.cache = cache
        self.query_cache = QueryLRU(config.query_cache_entries)
        self.on_cache = on_cache
        self.on_spread = on_spread
        self._runnable: RunnableProbe = runnable or foreign_runnable
        self._cpus = usable_cpus()
        #: ingest embeddings in flight on the ingest thread (a task of ours the probe sees)
        self._ingest_busy = 0
        self._last_attempt = float("-inf")
        self._load_lock = asyncio.Lock()
        # Its thread starts on first use: nothing runs before the app starts.
        self._ingest_pool = embedding_pool("embed-ingest", config.ingest_nice, config.ingest_idle)
        #: set whenever the main backend changes (the backfill waits on it)
        self.changed = asyncio.Event()
        self.window = (DedupWindow(config.dedup_window_s, config.dedup_max_entries)
                       if config.dedup_enabled else None)
        self.templates = (TemplateVectors(config.template_vectors_max_entries)
                          if config.template_vectors_enabled else None)

    # --- state ----------------------------------------------------------------------------
    @property
    def fallback_state(self) -> int:
        """0: running as asked; 1: no model (events go without vectors, backfilled later);
        2: a GPU was wanted but the model runs on the CPU; 3: the fallback endpoint."""
        if self.device == "remote" and self.available:
            return 3
        if not self.local:
            return 1
        return 2 if self.device == "cpu" and self.gpu_wanted else 0

    @property
    def batch_max(self) -> int:
        """Events per pulled batch: larger on the GPU."""
        c = self.config
        return c.gpu_batch_max if self.device == "gpu" else c.batch_max

    @property
    def rpc_chunk(self) -> int:
        c = self.config
        return max(1, c.gpu_rpc_batch_chunk if self.device == "gpu" else c.rpc_batch_chunk)

    def prefix(self, kind: Kind) -> str:
        """The prefix of `kind` for the model (explicit settings win over the automatic one)."""
        name = str(getattr(self.ingest, "model_name", "") or "")
        q, d = default_prefixes(name)
        c = self.config
        if kind == "query":
            return c.query_prefix if c.query_prefix is not None else q
        return c.document_prefix if c.document_prefix is not None else d

    def close(self) -> None:
        backends = (self.ingest, self.query)
        for b in {id(b): b for b in backends if b is not None}.values():
            b.close()
        self.ingest = self.query = None
        self.device = "none"
        self._ingest_pool.shutdown(wait=False)
        self._ingest_pool = embedding_pool("embed-ingest", self.config.ingest_nice,
                                           self.config.ingest_idle)

    # --- embedding ------------------------------------------------------------------------
    async def _on_ingest_thread(self, backend: EmbedBackend,
                                texts: list[str]) -> Sequence[list[float]]:
        """`backend.embed` on the ingest thread (lowered priority: see `priority`)."""
        self._ingest_busy += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._ingest_pool, backend.embed, texts)
        finally:
            self._ingest_busy -= 1

    def _count(self, cache: str, hits: int, misses: int) -> None:
        if self.on_cache is not None and (hits or misses):
            self.on_cache(cache, hits, misses)

    async def _compute(self, backend: EmbedBackend, texts: list[str],
                       demote: bool = True) -> list[list[float] | None]:
        """Vectors for `texts`; a text the model fails on (after retrying it alone) gets None:
        the pipeline never stalls on one event."""
        try:
            return list(await self._on_ingest_thread(backend, texts))
        except Exception as exc:
            if getattr(backend, "device", None) == "remote":
                # not a per-text problem: give up on the endpoint for now (it is probed again
                # after model_retry_s); these memories go without vectors and are backfilled
                log.warning("the fallback endpoint failed (%s); running without vectors", exc)
                if backend is self.ingest:
                    self._swap(None, None, "none", f"fallback endpoint failed: {str(exc)[:300]}")
                return [None] * len(texts)
            if (demote and backend is self.ingest and getattr(backend, "device", None) == "gpu"
                    and await self._demote_to_cpu(exc) and self.ingest is not None):
                return await self._compute(self.ingest, texts, demote=False)
            log.exception("embedding a batch of %d failed; retrying one by one", len(texts))
        out: list[list[float] | None] = []
        for text in texts:
            try:
                out.append((await self._on_ingest_thread(backend, [text]))[0])
            except Exception:
                log.exception("embedding failed for one text; it gets no vector")
                out.append(None)
        return out

    async def _embed_cached(self, backend: EmbedBackend,
                            texts: list[str]) -> list[list[float] | None]:
        """Document vectors through the disk cache (texts already prefixed)."""
        fp = backend.fingerprint
        cache = self.cache
        hits: dict[int, list[float]] = {}
        if cache is not None:
            try:
                hits = await asyncio.to_thread(cache.get_many, fp, texts)
            except Exception:
                log.exception("embedding cache read failed")
        miss = [i for i in range(len(texts)) if i not in hits]
        self._count("disk", len(hits), len(miss))
        out: list[list[float] | None] = [hits.get(i) for i in range(len(texts))]
        if not miss:
            return out
        vecs = await self._compute(backend, [texts[i] for i in miss])
        for i, v in zip(miss, vecs, strict=True):
            out[i] = v
        if cache is not None:
            items = [(texts[i], v) for i, v in zip(miss, vecs, strict=True) if v is not None]
            try:
                await asyncio.to_thread(cache.put_many, fp, items)
            except Exception:
                log.exception("embedding cache write failed")
        return out

    async def embed_ingest(self, texts: Sequence[str]) -> list[list[float] | None] | None:
        """Vectors for a batch of event texts (document prefix, cache); None without a model."""
        backend = self.ingest
        if backend is None or not texts:
            return None
        p = self.prefix("document")
        return await self._embed_cached(backend, [p + t for t in texts])

    def embed_query(self, texts: Sequence[str], kind: Kind = "query", *,
                    exclusive: bool = False) -> list[list[float]]:
        """Query RPC, blocking, on the caller's thread (the query responder's own): the query
        context and an in-memory LRU. `exclusive`: the caller waits on nothing else, so the
        embedding may be spread over `query_parallel_threads` (see `_threads_for`)."""
        backend = self.query
        if backend is None:
            raise ModelUnavailable(self.error or "no embedding model loaded")
        p = self.prefix(kind)
        final = [p + t for t in texts]
        fp = backend.fingerprint
        got: list[list[float] | None] = [self.query_cache.get(fp, t) for t in final]
        miss = [i for i, v in enumerate(got) if v is None]
        self._count("query", len(final) - len(miss), len(miss))
        if miss:
            todo = [query_input(texts[i], p, self.config.query_max_tokens,
                                getattr(backend, "count_tokens", None))
                    if kind == "query" else final[i] for i in miss]
            threads = self._threads_for(backend) if exclusive else None
            embed_on = getattr(backend, "embed_on", None)
            vecs = embed_on(todo, threads) if threads and embed_on else backend.embed(todo)
            for i, v in zip(miss, vecs, strict=True):
                got[i] = v
                self.query_cache.put(fp, final[i], v)
        return [v for v in got if v is not None]

    def _threads_for(self, backend: EmbedBackend) -> int | None:
        """More threads than the query context's own for one exclusive query, when the machine
        has nothing else to run: a long prompt's embedding is then ~1.9x faster (2 threads on a
        Zen 1 core pair: 128 tokens 178 -> 91 ms). Not on the GPU, nor beside anything running
        (our ingest thread, at a lower priority, gives way; anything else would stall it)."""
        want = min(self.config.query_parallel_threads, self._cpus)
        own = int(getattr(backend, "n_threads", 1) or 1)
        if want <= own or getattr(backend, "device", "cpu") != "cpu":
            return None
        # Ours besides this thread: the ingest's threads while it computes.
        ingest_threads = int(getattr(self.ingest, "n_threads", 1) or 1)
        spread = machine_idle(ingest_threads if self._ingest_busy else 0, self._runnable)
        if self.on_spread is not None:
            self.on_spread(spread)
        return want if spread else None

    async def embed_documents(self, texts: Sequence[str],
                              kind: Kind = "document") -> list[list[float]]:
        """Bulk embedding (`rpc_embed_batch`) on the ingest context through the disk cache, in
        chunks so ingest batches interleave."""
        backend = self.ingest
        if backend is None:
            raise ModelUnavailable(self.error or "no embedding model loaded")
        p = self.prefix(kind)
        out: list[list[float]] = []
        step = self.rpc_chunk
        for i in range(0, len(texts), step):
            part = await self._embed_cached(backend, [p + t for t in texts[i:i + step]])
            failed = sum(v is None for v in part)
            if failed:
                raise RuntimeError(f"the model failed on {failed} of {len(part)} texts")
            out.extend(v for v in part if v is not None)
        return out

