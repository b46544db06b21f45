"""Embedder settings (environment prefix TR_EMBEDDER_; the shared ones in `ServiceSettings`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict
from totalrecall_schema.service_settings import DEFAULT_MODEL_FILE, ServiceSettings


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="TR_EMBEDDER_", extra="ignore")

    http_port: int = 8766

    #: Any GGUF embedding model; default `$TOTALRECALL_HOME/models/all-MiniLM-L6-v2.q8_0.gguf`.
    #: The dimension is read from the model; every vector carries the model's fingerprint.
    model_path: Path | None = None
    #: Prefixes put before query / document texts (e.g. nomic-embed's `search_query: `).
    #: None = automatic: `search_query: ` / `search_document: ` when the model's file name
    #: contains "nomic", else none. "" = explicitly none.
    query_prefix: str | None = None
    document_prefix: str | None = None

    # device: "auto" offloads every layer to the GPU when llama.cpp was built with GPU support
    # (CUDA, Metal, …) and falls back to the CPU otherwise (or when loading on the GPU fails);
    # "cuda" asks for the GPU explicitly (still falls back, with the reason in /health);
    # "cpu" never offloads.
    device: Literal["auto", "cpu", "cuda"] = "auto"
    #: On the GPU: tokens packed per llama.cpp decode (n_ctx = n_batch = n_ubatch); each text is
    #: still truncated to `n_ctx` tokens.
    gpu_n_batch: int = 2048
    #: On the GPU: events per pulled batch and texts per `rpc_embed_batch` llama call.
    gpu_batch_max: int = 256
    gpu_rpc_batch_chunk: int = 256

    # Fallback chain GPU → CPU → OpenAI-compatible endpoint → none (vector=None + backfill).
    #: Base URL of an OpenAI-compatible embeddings API (`…/v1/embeddings` is POSTed); off when
    #: unset. Used only while the local model is unavailable.
    fallback_url: str | None = None
    fallback_model: str | None = None
    fallback_api_key: SecretStr | None = None
    fallback_timeout_s: float = 30.0

    # llama.cpp. n_ubatch is always n_batch (BERT runs in one ubatch; a smaller one aborts).
    #: Threads of the ingest model. All services share the CPU: one thread holds up best under
    #: contention (docs/perf/2026-11-26-settings-notes.md).
    #: 0: every core this process may use (with `ingest_idle`, ingest then takes every core
    #: nothing else wants).
    n_threads: int = Field(default=1, ge=0)
    #: Ingest contexts of `n_threads` threads each, embedding parts of a batch at once (0: as
    #: many as the usable cores allow; 1: one context). Several one-thread contexts keep up on
    #: a shared CPU where one context on several threads stalls (`core/parallel.py`).
    ingest_workers: int = Field(default=0, ge=0)
    #: Threads of the query model (its own Llama context, so queries never wait behind ingest).
    query_n_threads: int = 1
    #: Threads of an exclusive query (a recall's long prompt, whose keyword search waits for it)
    #: while nothing else on the machine is running. Beside a busy process ggml's threads stall
    #: each other, so it stays on `query_n_threads` then. 1 (or `query_n_threads`): never spread.
    query_parallel_threads: int = Field(default=2, ge=1)
    #: Nice value of the ingest embedding thread: ingest is background work, so on a busy CPU
    #: queries, the indexer and recall go first (0: ingest at the service's own priority).
    ingest_nice: int = Field(default=10, ge=0, le=19)
    #: The ingest embedding thread (and llama.cpp's threads it starts) under SCHED_IDLE: it
    #: runs only on CPU time nothing else wants, and anything that wakes (a query, Postgres,
    #: the indexer) preempts it at once. On a CPU kept busy by other work ingest then waits.
    ingest_idle: bool = False
    #: The interpreter's thread switch interval (s). Python's 5 ms default lets the ingest
    #: thread (vector post-processing, serialisation) keep the GIL that long while a query's
    #: thread, back from llama.cpp, waits for it; 0.5 ms bounds that wait.
    gil_switch_interval_s: float = Field(default=0.0005, gt=0, le=0.1)
    #: Context = batch = ubatch: 256 tokens matches sentence-transformers' truncation.
    n_ctx: int = 256
    flash_attn: bool = True
    #: When the model is missing/unloadable, look for it again this often (s).
    model_retry_s: float = 30.0

    # ingest consumer (adaptive batches): a fetch returns at once with what is pending (up to
    # `batch_max`); when that is more than one event but less than a full batch, wait up to
    # `batch_deadline_s` to fill it. An idle pipeline thus embeds a lone event immediately.
    batch_max: int = 64
    batch_deadline_s: float = 0.05
    #: Longest wait of one (idle) pull request; a fetch returns as soon as messages are there.
    fetch_timeout_s: float = 1.0
    ack_wait_s: float = 60.0
    max_deliver: int = 50
    #: Delay before a batch is redelivered when publishing fails.
    retry_delay_s: float = 2.0
    publish_timeout_s: float = 10.0

    # dedup: events equal but for timestamps (same namespace and category) fold into one memory
    dedup_enabled: bool = True
    dedup_window_s: float = 300.0
    dedup_max_entries: int = 20_000
    # events of one template (differing only in numbers and ids) share one embedding
    template_vectors_enabled: bool = True
    template_vectors_max_entries: int = 20_000
    #: Never folded: what people and the agent say (numbers there are facts, not noise).
    dedup_skip_categories: list[str] = Field(
        default_factory=lambda: ["conversation", "diagnosis", "approval", "user_pattern"])

    # RPC
    #: Texts per llama call in `rpc_embed_batch` (the ingest lock is released in between).
    rpc_batch_chunk: int = 64

    # embedding cache: (model fingerprint, sha256(text)) → float32 vector, SQLite under
    # `$TOTALRECALL_HOME/cache/embeddings`; rebuilds, re-ingest and redeliveries do not re-embed.
    cache_enabled: bool = True
    #: ~1.6 kB per 384-dim entry: 100k entries ≈ 160 MB. The least recently used go first.
    cache_max_entries: int = 100_000
    #: In-memory LRU of query vectors (query RPC).
    query_cache_entries: int = 1024
    #: A query (the agent's whole prompt, in automatic recall) is embedded from its last this
    #: many tokens, special tokens and prefix included: the question is at a prompt's end, the
    #: default model was trained on 128-token texts, and the query's cost grows with its length.
    #: 0: up to `n_ctx` tokens from its start, like a document.
    query_max_tokens: int = Field(default=128, ge=0)

    # backfill: events published with vector=None are remembered (SQLite under
    # `$TOTALRECALL_HOME/spool/embedder`) and republished with a vector once a model is back.
    backfill_enabled: bool = True
    #: How often the backfill looks for work (it also wakes when the model loads).
    backfill_interval_s: float = 2.0
    backfill_batch: int = 32
    backfill_max_entries: int = 200_000
    #: Give up on an event the model fails on after this many attempts.
    backfill_max_attempts: int = 5

    #: How often the consumer backlog gauge is refreshed (0: never).
    metrics_interval_s: float = 15.0

    @property
    def resolved_model_path(self) -> Path:
        return self.model_path or self.home / "models" / DEFAULT_MODEL_FILE

    @property
    def cache_path(self) -> Path:
        return self.home / "cache" / "embeddings" / "embeddings.sqlite3"

    @property
    def backfill_path(self) -> Path:
        return self.home / "spool" / "embedder" / "backfill.sqlite3"
