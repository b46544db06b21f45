"""The container: the embedder's object graph, built from its settings. Nothing is loaded,
opened or connected here (`lifecycle.py` does that when the app starts)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from faststream.nats import NatsBroker
from pydantic import SecretStr
from totalrecall_worker import WorkerRuntime

from .adapters.backfill_journal import BackfillJournal
from .adapters.embedding_cache import EmbeddingCache
from .adapters.llama_probe import gpu_offload_supported
from .adapters.query_responder import QueryResponder
from .adapters.remote import default_remote_factory
from .core.backend import EmbedBackend
from .core.engine import CacheHook, Engine, EngineConfig, LocalFactory, RemoteFactory, SpreadHook
from .handlers import handle_query_rpc
from .metrics import Metrics
from .settings import Settings

log = logging.getLogger("totalrecall.embedder")


@dataclass
class Container:
    settings: Settings
    metrics: Metrics
    engine: Engine
    broker: NatsBroker
    #: The query RPC on a thread of its own (own loop, own connection): query_responder.py.
    responder: QueryResponder
    runtime: WorkerRuntime = field(default_factory=WorkerRuntime)
    #: Memories published without a vector, for the backfill (None: backfill off).
    journal: BackfillJournal | None = None
    #: The documents' embedding cache the engine reads through (None: off or not open yet).
    cache: EmbeddingCache | None = None
    #: What llama.cpp's CPU backend was built for (filled at start, shown in /health).
    cpu_features: list[str] = field(default_factory=list)

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str],
                      stream: str) -> Any:
        """To JetStream; returns the PubAck (raises on failure)."""
        return await self.broker.publish(payload, subject, headers=headers, stream=stream,
                                         timeout=self.settings.publish_timeout_s)

    def open_stores(self) -> None:
        """The embedding cache and the backfill journal (SQLite; blocking). A cache that cannot
        be opened is skipped; a journal that cannot is kept in memory."""
        s = self.settings
        if s.cache_enabled:
            try:
                self.cache = self.engine.cache = EmbeddingCache(s.cache_path,
                                                                s.cache_max_entries)
            except (OSError, sqlite3.Error) as exc:
                log.warning("embedding cache disabled: cannot open %s: %s", s.cache_path, exc)
        if s.backfill_enabled:
            try:
                self.journal = BackfillJournal(s.backfill_path, s.backfill_max_entries)
            except (OSError, sqlite3.Error) as exc:
                log.warning("backfill journal NOT durable: cannot open %s (%s); keeping it in "
                            "memory", s.backfill_path, exc)
                self.journal = BackfillJournal(None, s.backfill_max_entries)


def build_engine(settings: Settings, *, backend: EmbedBackend | None = None,
                 query_backend: EmbedBackend | None = None,
                 local_factory: LocalFactory | None = None,
                 remote_factory: RemoteFactory | None = None,
                 gpu_probe: Callable[[], bool] | None = None,
                 on_cache: CacheHook | None = None,
                 on_spread: SpreadHook | None = None) -> Engine:
    key: Any = settings.fallback_api_key  # SecretStr (a str after an unvalidated model_copy)
    if isinstance(key, SecretStr):
        key = key.get_secret_value()
    cfg = settings.section(EngineConfig, model_path=settings.resolved_model_path,
                           dedup_skip_categories=frozenset(settings.dedup_skip_categories),
                           fallback_api_key=key)
    return Engine(cfg, backend=backend, query_backend=query_backend,
                  local_factory=local_factory,
                  remote_factory=remote_factory or default_remote_factory,
                  gpu_probe=gpu_probe or gpu_offload_supported, on_cache=on_cache,
                  on_spread=on_spread)


def build(settings: Settings, *, embedder_backend: EmbedBackend | None = None,
          query_backend: EmbedBackend | None = None,
          local_factory: LocalFactory | None = None,
          remote_factory: RemoteFactory | None = None,
          gpu_probe: Callable[[], bool] | None = None,
          metrics: Metrics | None = None) -> Container:
    """`embedder_backend` (a fake in unit tests) replaces the llama.cpp model for both paths;
    `query_backend` overrides the query path only; `local_factory` / `remote_factory` /
    `gpu_probe` replace how models are loaded (device selection tests)."""
    metrics = metrics or Metrics()
    engine = build_engine(settings, backend=embedder_backend, query_backend=query_backend,
                          local_factory=local_factory, remote_factory=remote_factory,
                          gpu_probe=gpu_probe, on_cache=metrics.cache_hook,
                          on_spread=metrics.spread_hook)
    responder = QueryResponder(
        settings.nats_connect, settings.topology.rpc_embed_query,
        lambda body: handle_query_rpc(body, engine, metrics).model_dump_json().encode())
    metrics.query_rpc_up.set_function(lambda: 1.0 if responder.connected else 0.0)
    broker = NatsBroker(**settings.nats_broker_options(), log_level=logging.DEBUG)
    return Container(settings=settings, metrics=metrics, engine=engine, broker=broker,
                     responder=responder)
