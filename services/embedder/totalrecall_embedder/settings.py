"""Embedder settings (environment prefix TR_EMBEDDER_)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from totalrecall_schema import Topology

DEFAULT_MODEL_FILE = "all-MiniLM-L6-v2.f16.gguf"


def _default_home() -> Path:
    return Path(os.environ.get("TOTALRECALL_HOME", "~/.local/share/totalrecall")).expanduser()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TR_EMBEDDER_", extra="ignore")

    nats_url: str = "nats://127.0.0.1:4222"
    subject_prefix: str = "memory"
    stream_prefix: str = "MEMORY"
    http_host: str = "127.0.0.1"
    http_port: int = 8766

    home: Path = Field(default_factory=_default_home)
    #: The GGUF; default `$TOTALRECALL_HOME/models/all-MiniLM-L6-v2.f16.gguf`.
    model_path: Path | None = None

    # llama.cpp. n_ubatch is always n_batch (BERT runs in one ubatch; a smaller one aborts).
    #: Threads of the ingest model. All services share the CPU: 1 thread holds up far better
    #: under contention (embedding.md: 27 vs 1.5–3 texts/s with two busy neighbours).
    n_threads: int = 1
    #: Threads of the query model (its own Llama context, so queries never wait behind ingest).
    query_n_threads: int = 1
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

    # dedup of repeated memories (same normalised content, namespace and category)
    dedup_enabled: bool = True
    dedup_window_s: float = 300.0
    dedup_max_entries: int = 20_000
    #: Never folded: what people and the agent say (numbers there are facts, not noise).
    dedup_skip_categories: list[str] = Field(
        default_factory=lambda: ["conversation", "diagnosis", "approval", "user_pattern"])

    # RPC
    #: Texts per llama call in `rpc_embed_batch` (the ingest lock is released in between).
    rpc_batch_chunk: int = 64

    @property
    def topology(self) -> Topology:
        return Topology(prefix=self.subject_prefix, stream_prefix=self.stream_prefix)

    @property
    def resolved_model_path(self) -> Path:
        return self.model_path or self.home / "models" / DEFAULT_MODEL_FILE
