"""The indexer app: a FastStream NATS worker with /metrics and /health."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import time
from typing import Any

import nats
from faststream.asgi import AsgiFastStream, AsgiResponse, get
from faststream.nats import NatsBroker
from faststream.params import NoCast
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from prometheus_client import make_asgi_app
from totalrecall_schema import (
    AdminReply,
    DeadLetter,
    EmbedReply,
    EmbedRequest,
    ensure_streams,
)

from .core.indexer import EmbedFn, Indexer, IndexerConfig, StoreUnavailable
from .core.markdown import MarkdownLog
from .core.pgstore import PgStore
from .core.tiers import ZvecTiers
from .handlers import handle_admin, handle_embedded_batch, handle_search
from .metrics import Metrics
from .settings import Settings

log = logging.getLogger("totalrecall.indexer")


async def _raw_decoder(msg: Any) -> Any:
    """Hand the handlers the raw bytes: they validate themselves (bad payloads → DLQ)."""
    return msg.body


def build_indexer(settings: Settings, metrics: Metrics | None = None,
                  pg: PgStore | None = None, tiers: ZvecTiers | None = None) -> Indexer:
    metrics = metrics or Metrics()
    return Indexer(
        markdown=MarkdownLog(settings.memory_dir,
                             on_repair=lambda _path, _reason: metrics.markdown_repairs.inc()),
        pg=pg or PgStore(settings.pg_dsn),
        tiers=tiers or ZvecTiers(settings.zvec_dir, default_dim=settings.dim,
                                 optimize_threads=settings.optimize_threads),
        metrics=metrics,
        config=IndexerConfig(
            hot_max_age_s=settings.hot_max_age_s, warm_max_age_s=settings.warm_max_age_s,
            cold_max_age_s=settings.cold_max_age_s,
            search_ef=settings.search_ef, linear_max_docs=settings.linear_max_docs,
            optimize_min_new_docs=settings.optimize_min_new_docs,
            optimize_max_delay_s=settings.optimize_max_delay_s,
            embed_batch=settings.embed_batch, memory_md_namespace=settings.memory_md_namespace,
            memory_md_retry_s=settings.memory_md_retry_s),
    )


async def refresh_runtime_gauges(nc: Any, settings: Settings, metrics: Metrics) -> None:
    """Consumer backlog, dead-letter depth, free disk (each best effort)."""
    topo = settings.topology
    try:
        free = (await asyncio.to_thread(shutil.disk_usage, settings.home)).free
        metrics.state_disk_free.set(free)
    except OSError as exc:
        log.debug("disk usage of %s: %s", settings.home, exc)
    if nc is None or not nc.is_connected:
        return
    js = nc.jetstream()
    try:
        info = await js.consumer_info(topo.embedded_stream, topo.indexer_durable, timeout=5)
        metrics.consumer_pending.set((info.num_pending or 0) + (info.num_ack_pending or 0))
    except Exception as exc:  # consumer not created yet, NATS trouble
        log.debug("consumer info: %s", exc)
    try:
        dlq = await js.stream_info(topo.dlq_stream)
        metrics.dlq_messages.set(dlq.state.messages)
    except Exception as exc:
        log.debug("dlq stream info: %s", exc)


def nats_embed_fn(nc: Any, settings: Settings) -> EmbedFn:
    """Embed documents through the embedder's `rpc_embed_batch` (None when unavailable)."""
    subject = settings.topology.rpc_embed_batch

    async def embed(texts: list[str]) -> EmbedReply | None:
        req = EmbedRequest(texts=texts, kind="document")
        try:
            msg = await nc.request(subject, req.model_dump_json().encode(),
                                   timeout=settings.embed_timeout_s)
        except Exception as exc:  # no responders, timeout, connection closed
            log.warning("embedder unavailable: %s", exc)
            return None
        return EmbedReply.model_validate_json(msg.data)

    return embed


def create_app(settings: Settings, *, indexer: Indexer | None = None,
               embed: EmbedFn | None = None, pg_connect_timeout_s: float = 60.0,
               ) -> AsgiFastStream:
    topo = settings.topology
    metrics = indexer.metrics if indexer is not None else Metrics()
    idx = indexer or build_indexer(settings, metrics)
    broker = NatsBroker(settings.nats_url, log_level=logging.DEBUG)
    state: dict[str, Any] = {"ready": False, "tasks": [], "nc": None, "embed": embed,
                             "consuming": False}

    async def publish_dlq(dl: DeadLetter) -> None:
        await state["nc"].jetstream().publish(
            topo.dlq_subject("indexer"), dl.model_dump_json().encode(), stream=topo.dlq_stream,
            headers={"content-type": "application/json"})

    # The embedded-events consumer is a plain nats-py pull loop rather than a FastStream
    # batch subscriber: FastStream 0.7.8's batch loop drops an already-fetched partial batch
    # when nats-py raises a bare asyncio.TimeoutError while topping it up (the messages then
    # wait for ack_wait before redelivery).
    async def subscribe() -> Any:
        js = state["nc"].jetstream()
        return await js.pull_subscribe(
            topo.embedded_all, durable=topo.indexer_durable, stream=topo.embedded_stream,
            config=ConsumerConfig(
                durable_name=topo.indexer_durable, ack_policy=AckPolicy.EXPLICIT,
                deliver_policy=DeliverPolicy.ALL, ack_wait=settings.ack_wait_s,
                max_ack_pending=20_000, filter_subject=topo.embedded_all))

    async def consume_loop(sub: Any) -> None:
        while state["consuming"]:
            try:
                msgs = await sub.fetch(settings.batch_size, timeout=settings.fetch_timeout_s)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            except Exception as exc:  # connection trouble: nats-py reconnects by itself
                log.warning("fetch failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            try:
                await handle_embedded_batch(msgs, idx, publish_dlq, settings.retry_delay_s)
            except Exception:  # never let the loop die; unacked messages come back
                log.exception("batch handling failed")

    # Vector search is on every recall's critical path: a plain nats-py subscription (FastStream's
    # per-message machinery cost about as much CPU as a hot-tier search), up to 4 at a time.
    searching = asyncio.Semaphore(4)
    in_flight: set[asyncio.Task[None]] = set()

    async def answer_search(msg: Any) -> None:
        async with searching:
            reply = await handle_search(msg.data, idx)
        if msg.reply:
            with contextlib.suppress(Exception):  # the asker went away
                await msg.respond(reply.model_dump_json().encode())

    async def on_search(msg: Any) -> None:
        task = asyncio.create_task(answer_search(msg))  # nats-py runs callbacks one by one
        in_flight.add(task)
        task.add_done_callback(in_flight.discard)

    # Several workers: `stats` (with the progress) is answered while a rebuild runs.
    @broker.subscriber(topo.rpc_index_admin, decoder=_raw_decoder, max_workers=4)
    async def on_admin(body: NoCast[Any]) -> AdminReply:
        return await handle_admin(body, idx, state["embed"])

    async def publish_progress(progress: dict[str, Any]) -> None:
        nc = state["nc"]
        if nc is not None and nc.is_connected:
            await nc.publish(topo.rpc_index_progress, json.dumps(progress, default=str).encode())

    async def startup() -> None:
        await asyncio.to_thread(idx.tiers.open)
        for tier in idx.tiers.quarantined:  # logged by tiers; re-indexed by _reindex_loop
            metrics.quarantined.labels(tier=tier).inc()
        repaired = await asyncio.to_thread(idx.markdown.recover)  # torn tails after a crash
        if repaired:
            log.warning("repaired torn daily logs after an unclean shutdown: %s", repaired)
        deadline = time.monotonic() + pg_connect_timeout_s
        while True:
            try:
                await idx.pg.start()
                break
            except Exception as exc:  # Postgres not up yet: retry until the deadline
                if time.monotonic() > deadline:
                    raise
                log.warning("postgres not reachable yet (%s); retrying", exc)
                await asyncio.sleep(1.0)
        await idx.load_tombstones()  # before the consumer starts: forgotten stays forgotten
        nc = await nats.connect(settings.nats_url, name="totalrecall-indexer-admin")
        state["nc"] = nc
        await ensure_streams(nc.jetstream(), topo)
        if state["embed"] is None:
            state["embed"] = nats_embed_fn(nc, settings)
        if idx.on_progress is None:
            idx.on_progress = publish_progress

    async def after_startup() -> None:
        state["search_sub"] = await state["nc"].subscribe(topo.rpc_vector_search, cb=on_search)
        # The RPC subscriptions are in place once the server has processed our SUBs.
        for conn in (broker.connection, state["nc"]):
            try:
                await conn.flush(timeout=10)
            except Exception as exc:  # requests may see "no responders" for a moment
                log.warning("could not confirm the RPC subscriptions with the server: %r", exc)
        await idx.refresh_metrics()
        state["consuming"] = True
        state["consumer"] = asyncio.create_task(consume_loop(await subscribe()))
        # Always on (not a background nicety): a tier whose last HNSW build was interrupted
        # takes no writes until a build completed; ingest is redelivered meanwhile.
        tasks = [asyncio.create_task(_held_builds_loop(idx, settings))]
        if settings.background_tasks:
            tasks += [asyncio.create_task(_compact_loop(idx, settings)),
                      asyncio.create_task(_optimize_loop(idx, settings))]
        if settings.memory_md_poll_s > 0:
            tasks.append(asyncio.create_task(_memory_md_loop(idx, settings, state)))
        if settings.metrics_interval_s > 0:
            tasks.append(asyncio.create_task(_gauges_loop(idx, settings, state)))
        # A tier that could not be opened (refilled), or whose build was interrupted (checked):
        # re-indexed from Postgres, whenever `tiers.reindex` lists one.
        tasks.append(asyncio.create_task(_reindex_loop(idx, settings, state)))
        state["tasks"] = tasks
        state["ready"] = True

    async def shutdown() -> None:
        state["ready"] = False
        state["consuming"] = False
        search_sub = state.pop("search_sub", None)
        if search_sub is not None:
            with contextlib.suppress(Exception):
                await search_sub.unsubscribe()
        if in_flight:
            await asyncio.wait(set(in_flight), timeout=10)
        consumer = state.get("consumer")
        if consumer is not None:  # let the current batch finish (bounded), then stop
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(consumer, timeout=settings.fetch_timeout_s + 30)
        for task in state["tasks"]:
            task.cancel()
        for task in state["tasks"]:
            with contextlib.suppress(BaseException):
                await task

    async def after_shutdown() -> None:
        async with idx.write_lock:
            if state["nc"] is not None:
                with contextlib.suppress(Exception):
                    await state["nc"].close()
            await idx.pg.close()
            await idx.close_stores()
            # Waits for an append still running in a thread (the log's own lock), then records
            # that the daily logs need no tail check at the next start.
            await asyncio.to_thread(idx.markdown.mark_clean)

    @get
    async def health(scope: Any) -> AsgiResponse:
        if not state["ready"]:
            return _json({"status": "starting"}, 503)
        pg_ok = await idx.pg.ping()
        nc = state["nc"]
        nats_ok = bool(nc is not None and nc.is_connected)
        try:
            tiers = await asyncio.to_thread(idx.tiers.stats)
        except Exception as exc:
            return _json({"status": "error", "zvec": str(exc)}, 503)
        reindex = {t: {"reason": why, **idx.reindex_state.get(t, {})}
                   for t, why in idx.tiers.reindex.items()}
        held = dict(idx.tiers.held)
        status = "ok" if pg_ok and nats_ok and not reindex and not held else "degraded"
        body = {"status": status, "postgres": pg_ok, "nats": nats_ok,
                "model": idx.tiers.model, "dim": idx.tiers.dim,
                "docs": {t: int(s["doc_count"]) for t, s in tiers.items()}}
        if reindex:
            body["reindex"] = reindex
        if held:
            body["writes_held"] = held
        return _json(body, 200)

    app = AsgiFastStream(
        broker,
        asgi_routes=[("/metrics", make_asgi_app(metrics.registry)), ("/health", health)],
        on_startup=[startup], after_startup=[after_startup],
        on_shutdown=[shutdown], after_shutdown=[after_shutdown],
    )
    app.indexer = idx  # type: ignore[attr-defined]  # for tests and the CLI
    return app


def _json(obj: Any, status: int) -> AsgiResponse:
    return AsgiResponse(json.dumps(obj, default=str).encode(), status_code=status,
                        headers={"content-type": "application/json"})


async def _compact_loop(idx: Indexer, settings: Settings) -> None:
    delay = min(60.0, settings.compact_interval_s)  # first pass soon after a (re)start
    while True:
        await asyncio.sleep(delay)
        delay = settings.compact_interval_s
        try:
            moved = await idx.compact()
            if any(moved.values()):
                log.info("compaction moved %s", moved)
        except Exception:
            log.exception("compaction failed")


async def _memory_md_loop(idx: Indexer, settings: Settings, state: dict[str, Any]) -> None:
    """Index MEMORY.md at startup, then whenever it changes (mtime poll)."""
    force = True
    while True:
        try:
            if force or idx.memory_md_due():
                await idx.sync_memory_md(state["embed"], force=force)
                force = False
        except Exception:
            log.exception("MEMORY.md sync failed")
        await asyncio.sleep(settings.memory_md_poll_s if not force else settings.retry_delay_s)


async def _reindex_loop(idx: Indexer, settings: Settings, state: dict[str, Any]) -> None:
    """Re-index the tiers `tiers.reindex` lists; retried while the embedder is unavailable or
    the tier's writes are held (its interrupted build is being completed)."""
    while True:
        if not idx.tiers.reindex:
            await idx.reindex_wanted.wait()
        idx.reindex_wanted.clear()
        try:
            await idx.reindex_tiers(state["embed"])
        except StoreUnavailable as exc:
            delay = settings.retry_delay_s if idx.tiers.held else settings.memory_md_retry_s
            log.warning("%s; retrying in %.0fs", exc, delay)
            with contextlib.suppress(TimeoutError):  # or as soon as a held build completed
                await asyncio.wait_for(idx.reindex_wanted.wait(), timeout=delay)
        except Exception:
            log.exception("re-index failed; retrying")
            await asyncio.sleep(settings.memory_md_retry_s)


async def _held_builds_loop(idx: Indexer, settings: Settings) -> None:
    """Complete the HNSW build of every tier whose writes are held, whenever there is one."""
    while True:
        if not idx.tiers.held:
            await idx.builds_wanted.wait()
        idx.builds_wanted.clear()
        try:
            await idx.finish_held_builds()
        except Exception:
            log.exception("HNSW build of a tier with held writes failed; retrying")
            await asyncio.sleep(settings.retry_delay_s)


async def _gauges_loop(idx: Indexer, settings: Settings, state: dict[str, Any]) -> None:
    while True:
        try:
            await refresh_runtime_gauges(state["nc"], settings, idx.metrics)
            if not idx.rebuilding:
                await idx.refresh_metrics()
        except Exception:
            log.exception("metrics refresh failed")
        await asyncio.sleep(settings.metrics_interval_s)


async def _optimize_loop(idx: Indexer, settings: Settings) -> None:
    while True:
        await asyncio.sleep(settings.optimize_interval_s)
        try:
            done = await idx.optimize_once()
            if done:
                log.info("HNSW built: %s", done)
        except Exception:
            log.exception("optimize failed")
        try:
            grown = await idx.pg.vacuum_if_grown(settings.vacuum_min_new_rows)
            if grown:
                log.info("vacuumed the Postgres mirror after %d inserts", grown)
        except Exception:
            log.exception("vacuum failed")
