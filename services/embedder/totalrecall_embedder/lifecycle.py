"""The embedder from start to stop: open the stores and load the model, consume events,
backfill vectors, report health, shut down in order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from typing import Any

from totalrecall_schema import ensure_streams_when_ready
from totalrecall_worker import PullConsumer, PullSpec, confirm_subscriptions, consumer_backlog

from .adapters.llama_probe import llama_cpu_features
from .container import Container
from .handlers import handle_backfill, handle_event_batch

log = logging.getLogger("totalrecall.embedder")

#: How long stop() lets a backfill round finish (s).
BACKFILL_DRAIN_S = 30.0


class Lifecycle:
    def __init__(self, c: Container) -> None:
        self.c = c
        s, topo = c.settings, c.settings.topology
        self.consumer = PullConsumer(
            lambda: c.broker.connection,
            PullSpec(stream=topo.events_stream, subject=topo.events_all,
                     more_subjects=(topo.host_events_all,),
                     durable=topo.embedder_durable, ack_wait_s=s.ack_wait_s,
                     max_deliver=s.max_deliver, max_ack_pending=10_000,
                     batch_max=lambda: c.engine.batch_max,  # larger on the GPU
                     fetch_timeout_s=s.fetch_timeout_s, batch_deadline_s=s.batch_deadline_s,
                     nak_delay_on_error_s=s.retry_delay_s),
            self.on_events)

    async def startup(self) -> None:
        c = self.c
        sys.setswitchinterval(c.settings.gil_switch_interval_s)
        await asyncio.to_thread(c.open_stores)
        await c.engine.load()
        c.cpu_features = await asyncio.to_thread(llama_cpu_features)
        c.metrics.observe_engine(c.engine)
        if c.journal is not None:
            c.metrics.backfill_pending.set(len(c.journal))
        nc = await c.broker.connect()
        await ensure_streams_when_ready(nc.jetstream(), c.settings.topology)

    async def serve(self) -> None:
        """After the broker started its subscribers: the query thread, the consumer, the loops."""
        c, runtime = self.c, self.c.runtime
        await confirm_subscriptions(c.broker.connection)
        await asyncio.to_thread(c.responder.start)
        runtime.start()
        await runtime.consume(self.consumer)
        if c.journal is not None:
            runtime.spawn(self.backfill_loop(), name="backfill", drain_s=BACKFILL_DRAIN_S,
                          wake=c.engine.changed.set)
        if c.settings.metrics_interval_s > 0:
            runtime.every(c.settings.metrics_interval_s, self.refresh_backlog,
                          what="consumer backlog gauge")
        runtime.ready = True

    async def shutdown(self) -> None:
        self.c.runtime.ready = False
        await asyncio.to_thread(self.c.responder.stop)
        await self.c.runtime.stop()

    async def close(self) -> None:
        """After the broker closed: the model and the SQLite stores."""
        await asyncio.to_thread(self._close_all)

    def _close_all(self) -> None:
        self.c.engine.close()
        for store in (self.c.cache, self.c.journal):
            if store is not None:
                with contextlib.suppress(Exception):
                    store.close()

    async def on_events(self, msgs: list[Any]) -> None:
        c = self.c
        self._observe_lag(msgs)
        await handle_event_batch(msgs, c.engine, c.metrics, c.settings.topology, c.publish,
                                 c.settings.retry_delay_s, journal=c.journal)

    def _observe_lag(self, msgs: list[Any]) -> None:
        now = time.time()
        for m in msgs:
            with contextlib.suppress(Exception):  # metadata of a non-JetStream message
                self.c.metrics.event_lag_seconds.observe(
                    max(0.0, now - m.metadata.timestamp.timestamp()))

    async def refresh_backlog(self) -> None:
        """The consumer's backlog (queue depth) for dashboards and the lag alert."""
        topo = self.c.settings.topology
        with contextlib.suppress(Exception):  # consumer not created yet, NATS trouble
            self.c.metrics.consumer_pending.set(await consumer_backlog(
                self.c.broker.connection, topo.events_stream, topo.embedder_durable))

    async def backfill_loop(self) -> None:
        """Republish memories that went out without a vector once a model is there: wakes every
        `backfill_interval_s` and whenever the model changes; yields between chunks so live
        ingest keeps its pace."""
        c, s, runtime = self.c, self.c.settings, self.c.runtime
        engine, journal = c.engine, c.journal
        assert journal is not None
        while runtime.running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(engine.changed.wait(), s.backfill_interval_s)
            engine.changed.clear()
            try:
                await engine.maybe_reload()  # the model may appear while no events flow
                c.metrics.observe_engine(engine)
                while runtime.running and engine.available and len(journal):
                    done = await handle_backfill(
                        engine, journal, c.metrics, s.topology, c.publish,
                        limit=s.backfill_batch, max_attempts=s.backfill_max_attempts)
                    if not done:
                        break
                    await asyncio.sleep(0)
            except Exception:
                log.exception("backfill round failed; retrying later")

    def health(self) -> tuple[dict[str, Any], int]:
        c, engine = self.c, self.c.engine
        if not c.runtime.ready:
            return {"status": "starting"}, 503
        nats_ok = False
        with contextlib.suppress(Exception):
            nats_ok = bool(c.broker.connection.is_connected)
        consuming = self.consumer.alive
        status = ("ok" if engine.local and nats_ok and consuming and c.responder.connected
                  else "degraded")
        journal, cache = c.journal, c.cache
        return {
            "status": status, "nats": nats_ok, "consuming": consuming,
            "query_rpc": c.responder.connected,
            "model": engine.fingerprint, "dim": engine.dim,
            "fallback": not engine.local,
            "device": engine.device if engine.available else "none",
            "device_reason": engine.device_reason,
            "cpu_features": c.cpu_features,
            "fallback_state": engine.fallback_state,
            "batch_max": engine.batch_max,
            "model_path": str(c.settings.resolved_model_path),
            "model_error": engine.error,
            "query_prefix": engine.prefix("query"), "document_prefix": engine.prefix("document"),
            "cache": None if cache is None else {
                "entries": len(cache), "hits": cache.hits, "misses": cache.misses,
                "path": str(cache.path)},
            "backfill": None if journal is None else {
                "pending": len(journal), "durable": journal.durable,
                "dropped": journal.dropped},
        }, 200
