"""The embedder app: a FastStream NATS worker with /metrics and /health."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any

from faststream.asgi import AsgiFastStream, AsgiResponse, get
from faststream.nats import NatsBroker
from faststream.params import NoCast
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from prometheus_client import make_asgi_app
from pydantic import SecretStr
from totalrecall_schema import EmbedReply, ensure_streams

from .core.backend import EmbedBackend
from .core.backfill import BackfillJournal
from .core.cache import EmbeddingCache
from .core.device import llama_cpu_features
from .core.engine import CacheHook, Engine, EngineConfig, LocalFactory, RemoteFactory, SpreadHook
from .handlers import handle_backfill, handle_batch_rpc, handle_event_batch, handle_query_rpc
from .metrics import Metrics
from .query_responder import QueryResponder
from .settings import Settings

log = logging.getLogger("totalrecall.embedder")


async def _raw_decoder(msg: Any) -> Any:
    """Hand the handlers the raw bytes: they validate themselves (bad payloads → DLQ)."""
    return msg.body


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
    cfg = EngineConfig(
        model_path=settings.resolved_model_path, n_threads=settings.n_threads,
        query_n_threads=settings.query_n_threads, n_ctx=settings.n_ctx,
        flash_attn=settings.flash_attn, model_retry_s=settings.model_retry_s,
        dedup_enabled=settings.dedup_enabled, dedup_window_s=settings.dedup_window_s,
        dedup_max_entries=settings.dedup_max_entries,
        dedup_skip_categories=frozenset(settings.dedup_skip_categories),
        template_vectors_enabled=settings.template_vectors_enabled,
        template_vectors_max_entries=settings.template_vectors_max_entries,
        rpc_batch_chunk=settings.rpc_batch_chunk, batch_max=settings.batch_max,
        device=settings.device, gpu_n_batch=settings.gpu_n_batch,
        gpu_batch_max=settings.gpu_batch_max, gpu_rpc_batch_chunk=settings.gpu_rpc_batch_chunk,
        query_prefix=settings.query_prefix, document_prefix=settings.document_prefix,
        fallback_url=settings.fallback_url, fallback_model=settings.fallback_model,
        fallback_api_key=key,
        fallback_timeout_s=settings.fallback_timeout_s,
        query_cache_entries=settings.query_cache_entries, ingest_nice=settings.ingest_nice,
        query_max_tokens=settings.query_max_tokens,
        query_parallel_threads=settings.query_parallel_threads)
    return Engine(cfg, backend=backend, query_backend=query_backend,
                  local_factory=local_factory, remote_factory=remote_factory,
                  gpu_probe=gpu_probe, on_cache=on_cache, on_spread=on_spread)


def create_app(settings: Settings, *, embedder_backend: EmbedBackend | None = None,
               query_backend: EmbedBackend | None = None,
               local_factory: LocalFactory | None = None,
               remote_factory: RemoteFactory | None = None,
               gpu_probe: Callable[[], bool] | None = None,
               metrics: Metrics | None = None) -> AsgiFastStream:
    """`embedder_backend` (a fake in unit tests) replaces the llama.cpp model for both paths;
    `query_backend` overrides the query path only;
    `local_factory` / `remote_factory` / `gpu_probe` replace how models are loaded (device
    selection tests). Nothing is loaded, opened or connected here."""
    topo = settings.topology
    metrics = metrics or Metrics()
    engine = build_engine(settings, backend=embedder_backend, query_backend=query_backend,
                          local_factory=local_factory, remote_factory=remote_factory, gpu_probe=gpu_probe,
                          on_cache=metrics.cache_hook, on_spread=metrics.spread_hook)
    broker = NatsBroker(settings.nats_url, log_level=logging.DEBUG)
    state: dict[str, Any] = {"ready": False, "consuming": False, "consumer": None,
                             "backfill": None, "journal": None, "cpu_features": []}

    async def publish(subject: str, payload: bytes, headers: dict[str, str],
                      stream: str) -> Any:
        # With `stream=` FastStream uses JetStream and returns the PubAck (raises on failure).
        return await broker.publish(payload, subject, headers=headers, stream=stream,
                                    timeout=settings.publish_timeout_s)

    # The events consumer is a plain nats-py pull loop rather than FastStream's
    # `PullSub(batch=True)`: FastStream 0.7.8 catches only `nats.errors.TimeoutError` while topping
    # up a batch, but nats-py raises a bare `asyncio.TimeoutError` when the batch deadline runs
    # out mid-fetch; the exception escapes, the already-fetched partial batch is dropped and those
    # messages wait `ack_wait` for redelivery (seen in bench/embedder_bench.py: a 60 s stall).
    async def subscribe() -> Any:
        while True:
            try:
                return await broker.connection.jetstream().pull_subscribe(
                    topo.events_all, durable=topo.embedder_durable, stream=topo.events_stream,
                    config=ConsumerConfig(
                        durable_name=topo.embedder_durable, ack_policy=JsAckPolicy.EXPLICIT,
                        deliver_policy=DeliverPolicy.ALL, ack_wait=settings.ack_wait_s,
                        max_deliver=settings.max_deliver, max_ack_pending=10_000,
                        filter_subject=topo.events_all))
            except Exception as exc:  # e.g. NATS restarting: try again
                log.warning("cannot subscribe to %s yet: %s", topo.events_stream, exc)
                await asyncio.sleep(1.0)

    async def consume_loop() -> None:
        sub = state["sub"] = await subscribe()
        while state["consuming"]:
            msgs = await fetch_batch(sub)
            if not msgs:
                continue
            observe_lag(msgs)
            try:
                await handle_event_batch(msgs, engine, metrics, topo, publish,
                                         settings.retry_delay_s, journal=state["journal"])
            except Exception:  # never let the loop die; unsettled messages come back
                log.exception("event batch failed; redelivering %d message(s)", len(msgs))
                for m in msgs:
                    if not getattr(m, "_ackd", False):
                        with contextlib.suppress(Exception):
                            await m.nak(delay=settings.retry_delay_s)

    async def fetch_batch(sub: Any) -> list[Any]:
        """Adaptive batching: a fetch returns at once with what is pending (idle: one event,
        handled immediately). When several are pending the pipeline is busy, so wait up to
        `batch_deadline_s` to fill the batch to `batch_max`."""
        batch_max = engine.batch_max  # larger on the GPU
        try:
            msgs = list(await sub.fetch(batch_max, timeout=settings.fetch_timeout_s))
        except TimeoutError:  # also nats.errors.TimeoutError (a subclass)
            return []
        except Exception as exc:  # connection trouble: nats-py reconnects by itself
            log.warning("fetch failed: %s", exc)
            await asyncio.sleep(1.0)
            return []
        if 1 < len(msgs) < batch_max and settings.batch_deadline_s > 0:
            with contextlib.suppress(Exception):  # TimeoutError: nothing more came
                msgs += await sub.fetch(batch_max - len(msgs),
                                        timeout=settings.batch_deadline_s)
        return msgs

    def observe_lag(msgs: list[Any]) -> None:
        now = time.time()
        for m in msgs:
            with contextlib.suppress(Exception):  # metadata of a non-JetStream message
                metrics.event_lag_seconds.observe(max(0.0, now - m.metadata.timestamp.timestamp()))

    async def gauges_loop() -> None:
        """The consumer's backlog (queue depth) for dashboards and the lag alert."""
        while state["consuming"]:
            with contextlib.suppress(Exception):  # consumer not created yet, NATS trouble
                info = await broker.connection.jetstream().consumer_info(
                    topo.events_stream, topo.embedder_durable, timeout=5)
                metrics.consumer_pending.set((info.num_pending or 0) + (info.num_ack_pending or 0))
            await asyncio.sleep(settings.metrics_interval_s)

    async def backfill_loop() -> None:
        """Republish memories that went out without a vector once a model is there: wakes every
        `backfill_interval_s` and whenever the model changes; yields between chunks so live
        ingest keeps its pace."""
        journal = state["journal"]
        while state["consuming"]:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(engine.changed.wait(), settings.backfill_interval_s)
            engine.changed.clear()
            try:
                await engine.maybe_reload()  # the model may appear while no events flow
                metrics.observe_engine(engine)
                while state["consuming"] and engine.available and len(journal):
                    done = await handle_backfill(
                        engine, journal, metrics, topo, publish, limit=settings.backfill_batch,
                        max_attempts=settings.backfill_max_attempts)
                    if not done:
                        break
                    await asyncio.sleep(0)
            except Exception:
                log.exception("backfill round failed; retrying later")

    # Queries are answered on a thread of their own (own loop, own connection): see
    # query_responder.py. Started after the broker, stopped before it.
    responder = QueryResponder(
        settings.nats_url, topo.rpc_embed_query,
        lambda body: handle_query_rpc(body, engine, metrics).model_dump_json().encode())
    metrics.query_rpc_up.set_function(lambda: 1.0 if responder.connected else 0.0)

    @broker.subscriber(topo.rpc_embed_batch, decoder=_raw_decoder)
    async def on_batch(body: NoCast[Any]) -> EmbedReply:
        return await handle_batch_rpc(body, engine, metrics)

    def open_stores() -> None:
        if settings.cache_enabled:
            try:
                engine.cache = EmbeddingCache(settings.cache_path, settings.cache_max_entries)
            except (OSError, sqlite3.Error) as exc:
                log.warning("embedding cache disabled: cannot open %s: %s",
                            settings.cache_path, exc)
        if settings.backfill_enabled:
            try:
                state["journal"] = BackfillJournal(settings.backfill_path,
                                                   settings.backfill_max_entries)
            except (OSError, sqlite3.Error) as exc:
                log.warning("backfill journal NOT durable: cannot open %s (%s); keeping it in "
                            "memory", settings.backfill_path, exc)
                state["journal"] = BackfillJournal(None, settings.backfill_max_entries)

    async def startup() -> None:
        sys.setswitchinterval(settings.gil_switch_interval_s)
        await asyncio.to_thread(open_stores)
        await engine.load()
        state["cpu_features"] = await asyncio.to_thread(llama_cpu_features)
        metrics.observe_engine(engine)
        if state["journal"] is not None:
            metrics.backfill_pending.set(len(state["journal"]))
        nc = await broker.connect()
        await ensure_streams(nc.jetstream(), topo)

    async def after_startup() -> None:
        # The RPC subscriptions are registered once the server has processed our SUBs:
        # a request racing the start would otherwise get "no responders".
        try:
            await broker.connection.flush(timeout=10)
        except Exception as exc:  # requests may see "no responders" for a moment
            log.warning("could not confirm the RPC subscriptions with the server: %r", exc)
        await asyncio.to_thread(responder.start)
        state["consuming"] = True
        state["consumer"] = asyncio.create_task(consume_loop())
        if state["journal"] is not None:
            state["backfill"] = asyncio.create_task(backfill_loop())
        if settings.metrics_interval_s > 0:
            state["gauges"] = asyncio.create_task(gauges_loop())
        state["ready"] = True

    async def shutdown() -> None:
        state["ready"] = False
        await asyncio.to_thread(responder.stop)
        state["consuming"] = False
        engine.changed.set()  # wake the backfill loop
        gauges = state.pop("gauges", None)
        if gauges is not None:
            gauges.cancel()
            with contextlib.suppress(BaseException):
                await gauges
        backfill = state.get("backfill")
        if backfill is not None:
            try:
                await asyncio.wait_for(backfill, timeout=30)
            except Exception as exc:
                log.warning("backfill stopped with %r", exc)
        consumer = state.get("consumer")
        if consumer is not None:  # let the current batch finish (bounded), then stop
            try:
                await asyncio.wait_for(consumer, timeout=settings.fetch_timeout_s + 30)
            except Exception as exc:  # a timeout cancels it
                log.warning("consumer stopped with %r", exc)
        sub = state.pop("sub", None)
        if sub is not None:
            # Nothing reads a pull subscription's queue outside fetch(): without this the
            # broker's connection drain waits on it for its full timeout (30 s).
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    def close_all() -> None:
        engine.close()
        for store in (engine.cache, state["journal"]):
            if store is not None:
                with contextlib.suppress(Exception):
                    store.close()

    async def after_shutdown() -> None:
        await asyncio.to_thread(close_all)

    @get
    async def health(scope: Any) -> AsgiResponse:
        if not state["ready"]:
            return _json({"status": "starting"}, 503)
        nats_ok = False
        with contextlib.suppress(Exception):
            nats_ok = bool(broker.connection.is_connected)
        consumer = state["consumer"]
        consuming = consumer is not None and not consumer.done()
        status = ("ok" if engine.local and nats_ok and consuming and responder.connected
                  else "degraded")
        journal = state["journal"]
        cache = engine.cache
        return _json({
            "status": status, "nats": nats_ok, "consuming": consuming,
            "query_rpc": responder.connected,
            "model": engine.fingerprint, "dim": engine.dim,
            "fallback": not engine.local,
            "device": engine.device if engine.available else "none",
            "device_reason": engine.device_reason,
            "cpu_features": state["cpu_features"],
            "fallback_state": engine.fallback_state,
            "batch_max": engine.batch_max,
            "model_path": str(settings.resolved_model_path),
            "model_error": engine.error,
            "query_prefix": engine.prefix("query"), "document_prefix": engine.prefix("document"),
            "cache": None if cache is None else {
                "entries": len(cache), "hits": cache.hits, "misses": cache.misses,
                "path": str(cache.path)},
            "backfill": None if journal is None else {
                "pending": len(journal), "durable": journal.durable,
                "dropped": journal.dropped},
        }, 200)

    app = AsgiFastStream(
        broker,
        asgi_routes=[("/metrics", make_asgi_app(metrics.registry)), ("/health", health)],
        on_startup=[startup], after_startup=[after_startup],
        on_shutdown=[shutdown], after_shutdown=[after_shutdown],
    )
    # for tests, the bench and the CLI
    app.engine = engine  # type: ignore[attr-defined]
    app.metrics = metrics  # type: ignore[attr-defined]
    app.query_responder = responder  # type: ignore[attr-defined]
    return app


def _json(obj: Any, status: int) -> AsgiResponse:
    return AsgiResponse(json.dumps(obj, default=str).encode(), status_code=status,
                        headers={"content-type": "application/json"})
