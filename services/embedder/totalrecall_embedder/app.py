"""The embedder app: a FastStream NATS worker with /metrics and /health."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from faststream.asgi import AsgiFastStream, AsgiResponse, get
from faststream.nats import NatsBroker
from faststream.params import NoCast
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from prometheus_client import make_asgi_app
from totalrecall_schema import EmbedReply, ensure_streams

from .core.backend import EmbedBackend
from .core.engine import Engine, EngineConfig
from .handlers import handle_embed_rpc, handle_event_batch
from .metrics import Metrics
from .settings import Settings

log = logging.getLogger("totalrecall.embedder")


async def _raw_decoder(msg: Any) -> Any:
    """Hand the handlers the raw bytes: they validate themselves (bad payloads → DLQ)."""
    return msg.body


def build_engine(settings: Settings, *, backend: EmbedBackend | None = None,
                 query_backend: EmbedBackend | None = None) -> Engine:
    cfg = EngineConfig(
        model_path=settings.resolved_model_path, n_threads=settings.n_threads,
        query_n_threads=settings.query_n_threads, n_ctx=settings.n_ctx,
        flash_attn=settings.flash_attn, model_retry_s=settings.model_retry_s,
        dedup_enabled=settings.dedup_enabled, dedup_window_s=settings.dedup_window_s,
        dedup_max_entries=settings.dedup_max_entries,
        dedup_skip_categories=frozenset(settings.dedup_skip_categories),
        rpc_batch_chunk=settings.rpc_batch_chunk)
    return Engine(cfg, backend=backend, query_backend=query_backend)


def create_app(settings: Settings, *, embedder_backend: EmbedBackend | None = None,
               query_backend: EmbedBackend | None = None,
               metrics: Metrics | None = None) -> AsgiFastStream:
    """`embedder_backend` (a fake in unit tests) replaces the llama.cpp model for both paths;
    `query_backend` overrides the query path only. Nothing is loaded or connected here."""
    topo = settings.topology
    metrics = metrics or Metrics()
    engine = build_engine(settings, backend=embedder_backend, query_backend=query_backend)
    broker = NatsBroker(settings.nats_url, log_level=logging.DEBUG)
    state: dict[str, Any] = {"ready": False, "consuming": False, "consumer": None}

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
            try:
                await handle_event_batch(msgs, engine, metrics, topo, publish,
                                         settings.retry_delay_s)
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
        try:
            msgs = list(await sub.fetch(settings.batch_max, timeout=settings.fetch_timeout_s))
        except TimeoutError:  # also nats.errors.TimeoutError (a subclass)
            return []
        except Exception as exc:  # connection trouble: nats-py reconnects by itself
            log.warning("fetch failed: %s", exc)
            await asyncio.sleep(1.0)
            return []
        if 1 < len(msgs) < settings.batch_max and settings.batch_deadline_s > 0:
            with contextlib.suppress(Exception):  # TimeoutError: nothing more came
                msgs += await sub.fetch(settings.batch_max - len(msgs),
                                        timeout=settings.batch_deadline_s)
        return msgs

    @broker.subscriber(topo.rpc_embed_query, decoder=_raw_decoder, max_workers=4)
    async def on_query(body: NoCast[Any]) -> EmbedReply:
        return await handle_embed_rpc(body, engine, metrics, "query")

    @broker.subscriber(topo.rpc_embed_batch, decoder=_raw_decoder)
    async def on_batch(body: NoCast[Any]) -> EmbedReply:
        return await handle_embed_rpc(body, engine, metrics, "batch")

    async def startup() -> None:
        await engine.load()
        metrics.fallback_state.set(0 if engine.available else 1)
        nc = await broker.connect()
        await ensure_streams(nc.jetstream(), topo)

    async def after_startup() -> None:
        # The RPC subscriptions are registered once the server has processed our SUBs:
        # a request racing the start would otherwise get "no responders".
        with contextlib.suppress(Exception):
            await broker.connection.flush(timeout=5)
        state["consuming"] = True
        state["consumer"] = asyncio.create_task(consume_loop())
        state["ready"] = True

    async def shutdown() -> None:
        state["ready"] = False
        state["consuming"] = False
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

    async def after_shutdown() -> None:
        await asyncio.to_thread(engine.close)

    @get
    async def health(scope: Any) -> AsgiResponse:
        if not state["ready"]:
            return _json({"status": "starting"}, 503)
        nats_ok = False
        with contextlib.suppress(Exception):
            nats_ok = bool(broker.connection.is_connected)
        consumer = state["consumer"]
        consuming = consumer is not None and not consumer.done()
        status = "ok" if engine.available and nats_ok and consuming else "degraded"
        return _json({"status": status, "nats": nats_ok, "consuming": consuming,
                      "model": engine.fingerprint,
                      "dim": engine.dim, "fallback": not engine.available,
                      "model_path": str(settings.resolved_model_path),
                      "model_error": engine.error}, 200)

    app = AsgiFastStream(
        broker,
        asgi_routes=[("/metrics", make_asgi_app(metrics.registry)), ("/health", health)],
        on_startup=[startup], after_startup=[after_startup],
        on_shutdown=[shutdown], after_shutdown=[after_shutdown],
    )
    # for tests, the bench and the CLI
    app.engine = engine  # type: ignore[attr-defined]
    app.metrics = metrics  # type: ignore[attr-defined]
    return app


def _json(obj: Any, status: int) -> AsgiResponse:
    return AsgiResponse(json.dumps(obj, default=str).encode(), status_code=status,
                        headers={"content-type": "application/json"})
