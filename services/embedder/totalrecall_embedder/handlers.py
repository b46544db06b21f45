"""Thin message handlers: decode, call the core, publish, then ack / nak."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from pydantic import ValidationError
from totalrecall_schema import EmbeddedEvent, EmbedReply, EmbedRequest, Topology, utcnow
from totalrecall_worker import dead_letter_then_ack

from .adapters.backfill_journal import BackfillJournal, Pending
from .core.backend import ModelUnavailable
from .core.batch import STAGE, Incoming, plan_batch
from .core.dedup import dedup_key
from .core.engine import Engine
from .metrics import Metrics

log = logging.getLogger("totalrecall.embedder")

JSON_HEADERS = {"content-type": "application/json"}


class RawMsg(Protocol):
    subject: str
    data: bytes

    async def ack(self) -> None: ...
    async def nak(self, delay: float | None = None) -> None: ...


#: publish(subject, payload, headers, stream) → resolves once JetStream acknowledged it.
Publish = Callable[[str, bytes, dict[str, str], str], Awaitable[Any]]


def _duplicate(puback: Any) -> bool:
    """JetStream answered "duplicate": it already held a message with this Nats-Msg-Id."""
    return bool(getattr(puback, "duplicate", False))


async def handle_event_batch(msgs: Sequence[RawMsg], engine: Engine, metrics: Metrics,
                             topology: Topology, publish: Publish,
                             retry_delay: float = 2.0,
                             journal: BackfillJournal | None = None) -> dict[str, int]:
    """One pulled batch of MemoryEvents → EmbeddedEvents.

    Every source message is acked only after what settles it (its EmbeddedEvent, the memory it
    was folded into, or its dead letter) was published and JetStream returned the PubAck; when a
    publish fails its sources are nak'ed with a delay (redelivered, never lost).

    With a `journal`, a memory published without a vector is recorded there (durably, before
    the ack) for the backfill; one published with a vector is forgotten — unless JetStream
    dropped that publish as a duplicate (then the vector never went out: the backfill sends it).
    """
    counts = {"published": 0, "dead": 0, "folded": 0, "retry": 0}
    if not msgs:
        return counts
    metrics.batch_size.observe(len(msgs))
    metrics.events_in.inc(len(msgs))
    await engine.maybe_reload()
    metrics.observe_engine(engine)

    plan = plan_batch([Incoming(m.subject, m.data) for m in msgs], engine.window,
                      can_embed=engine.available,
                      skip_categories=engine.config.dedup_skip_categories,
                      templates=engine.templates, model=engine.fingerprint,
                      topology=topology)

    async def dead_letter(i: int, payload: bytes) -> None:
        async def park() -> None:
            await publish(topology.dlq_subject(STAGE), payload, dict(JSON_HEADERS),
                          topology.dlq_stream)

        if await dead_letter_then_ack(msgs[i], park, retry_delay):
            metrics.dead_letters.inc()
            counts["dead"] += 1
        else:
            metrics.publish_errors.inc()
            counts["retry"] += 1

    dlq_tasks = [dead_letter(i, dl.model_dump_json().encode()) for i, dl in plan.dead]
    for _i, dl in plan.dead:
        log.info("dead letter from %s: %s", dl.subject, dl.reason[:200])

    vectors = None
    if plan.texts:
        t0 = time.perf_counter()
        vectors = await engine.embed_ingest(plan.texts)
        if vectors is not None:
            took = time.perf_counter() - t0
            metrics.embed_batch_seconds.observe(took)
            per_item = took / len(plan.texts)
            for _ in plan.texts:
                metrics.embed_item_seconds.observe(per_item)
    outgoing = plan.finish(vectors, engine.fingerprint, topology)

    async def send(o: Any) -> Any:
        return await publish(o.subject, o.embedded.model_dump_json().encode(),
                      {"Nats-Msg-Id": o.msg_id, **JSON_HEADERS}, topology.embedded_stream)

    results = await asyncio.gather(*(send(o) for o in outgoing), *dlq_tasks,
                                   return_exceptions=True)
    sent: list[tuple[Any, Any]] = []
    for o, res in zip(outgoing, results, strict=False):
        if isinstance(res, BaseException):
            log.warning("publishing %s failed (%s); %d message(s) will be redelivered",
                        o.subject, res, len(o.sources))
            metrics.publish_errors.inc()
            counts["retry"] += len(o.sources)
            for i in o.sources:
                await msgs[i].nak(delay=retry_delay)
            continue
        sent.append((o, res))
    if journal is not None and sent:
        put = [(o.embedded.event.key, o.embedded.model_dump_json().encode())
               for o, _ in sent if o.embedded.vector is None]
        remove = [o.embedded.event.key for o, res in sent
                  if o.embedded.vector is not None and not _duplicate(res)]
        try:
            await asyncio.to_thread(journal.record, put, remove)
        except Exception as exc:  # the record must be durable before the ack: redeliver
            log.warning("backfill journal write failed (%s); redelivering", exc)
            unvectored = [(o, r) for o, r in sent if o.embedded.vector is None]
            for o, _ in unvectored:
                counts["retry"] += len(o.sources)
                for i in o.sources:
                    await msgs[i].nak(delay=retry_delay)
            sent = [(o, r) for o, r in sent if o.embedded.vector is not None]
        metrics.backfill_pending.set(len(journal))
    for o, _res in sent:
        for i in o.sources:
            await msgs[i].ack()
        if engine.window is not None and o.dkey is not None:
            engine.window.put(o.dkey, o.to_seen())
        metrics.events_out.labels(kind=o.kind).inc()
        metrics.dedup_dropped.inc(o.folded)
        if o.kind == "reused":
            metrics.vectors_reused.inc()
        counts["published"] += 1
        counts["folded"] += o.folded
    return counts


async def handle_backfill(engine: Engine, journal: BackfillJournal, metrics: Metrics,
                          topology: Topology, publish: Publish, *, limit: int = 32,
                          max_attempts: int = 5) -> int:
    """Republish up to `limit` memories that went out without a vector, now with one
    (`Nats-Msg-Id: <key>:backfill`; the indexer upserts by key). Returns how many were settled
    (0: nothing to do or no model)."""
    if not engine.available or not len(journal):
        return 0
    entries = await asyncio.to_thread(journal.take, limit, max_attempts)
    if not entries:
        return 0
    good: list[tuple[Pending, EmbeddedEvent]] = []
    for e in entries:
        try:
            good.append((e, EmbeddedEvent.model_validate_json(e.payload)))
        except (ValidationError, ValueError) as exc:  # cannot happen unless the schema changed
            log.warning("dropping unreadable backfill entry %s: %s", e.key, exc)
            await asyncio.to_thread(journal.done, e.key, e.version)
            metrics.backfill_events.labels(outcome="dropped").inc()
    texts = [emb.event.embedding_text() for _, emb in good]
    vectors = await engine.embed_ingest(texts)
    if vectors is None:  # the model went away again
        return 0
    now = utcnow()
    settled = 0

    async def one(i: int, entry: Pending, emb: EmbeddedEvent) -> None:
        nonlocal settled
        vec = vectors[i]
        if vec is None:
            await asyncio.to_thread(journal.failed, entry.key, entry.version)
            metrics.backfill_events.labels(outcome="failed").inc()
            return
        update: dict[str, Any] = {"vector": vec, "model": engine.fingerprint, "dim": len(vec),
                                  "embedded_at": now}
        full = emb.model_copy(update=update)
        msg_id = f"{emb.event.key}:backfill"
        try:
            await publish(topology.embedded_subject_of(emb.event),
                          full.model_dump_json().encode(),
                          {"Nats-Msg-Id": msg_id, **JSON_HEADERS}, topology.embedded_stream)
        except Exception as exc:
            log.warning("backfill publish of %s failed (%s); will retry", emb.event.key, exc)
            metrics.publish_errors.inc()
            return
        await asyncio.to_thread(journal.done, entry.key, entry.version)
        _refresh_window(engine, full, msg_id)
        metrics.backfill_events.labels(outcome="embedded").inc()
        settled += 1

    await asyncio.gather(*(one(i, e, emb) for i, (e, emb) in enumerate(good)))
    metrics.backfill_pending.set(len(journal))
    if settled:
        log.info("backfill: %d memories republished with vectors (%d still waiting)", settled,
                 len(journal))
    return settled + len(entries) - len(good)


def _refresh_window(engine: Engine, emb: EmbeddedEvent, msg_id: str) -> None:
    """A repeat of a backfilled memory must fold into it (and carry its vector), not be
    republished without one."""
    if engine.window is None:
        return
    dkey = dedup_key(emb.event)
    seen = engine.window.get(dkey, emb.event.timestamp)
    if seen is not None and seen.key == emb.event.key:
        seen.embedded = emb.model_copy(update={"repeat_count": seen.count,
                                               "last_seen": seen.last_seen
                                               if seen.count > 1 else None})
        seen.msg_id = msg_id


def _parse_rpc(body: bytes, metrics: Metrics, path: str) -> EmbedRequest | EmbedReply:
    try:
        return EmbedRequest.model_validate_json(body)
    except (ValidationError, ValueError) as exc:
        metrics.rpc_requests.labels(kind=path, outcome="invalid").inc()
        return EmbedReply(error=f"invalid EmbedRequest: {exc}"[:2000])


def _rpc_failed(exc: Exception, metrics: Metrics, path: str, t0: float) -> EmbedReply:
    took_ms = (time.perf_counter() - t0) * 1000
    if isinstance(exc, ModelUnavailable):
        metrics.rpc_requests.labels(kind=path, outcome="unavailable").inc()
        return EmbedReply(error=f"embedding model unavailable: {exc}", took_ms=took_ms)
    log.error("embedding RPC failed", exc_info=exc)
    metrics.rpc_requests.labels(kind=path, outcome="error").inc()
    return EmbedReply(error=f"embedding failed: {exc}", took_ms=took_ms)


def _rpc_ok(vectors: list[list[float]], engine: Engine, metrics: Metrics, path: str,
            t0: float) -> EmbedReply:
    took = time.perf_counter() - t0
    metrics.query_seconds.labels(kind=path).observe(took)
    metrics.rpc_requests.labels(kind=path, outcome="ok").inc()
    return EmbedReply(vectors=vectors, model=engine.fingerprint, dim=engine.dim,
                      took_ms=took * 1000)


def handle_query_rpc(body: bytes, engine: Engine, metrics: Metrics) -> EmbedReply:
    """`rpc_embed_query`, blocking, on the query responder's own thread: the query context and
    the in-memory LRU. The prefix follows the request's `kind` (query / document)."""
    t0 = time.perf_counter()
    req = _parse_rpc(body, metrics, "query")
    if isinstance(req, EmbedReply):
        return req
    try:
        vectors = engine.embed_query(req.texts, req.kind, exclusive=req.exclusive)
    except Exception as exc:
        return _rpc_failed(exc, metrics, "query", t0)
    return _rpc_ok(vectors, engine, metrics, "query", t0)


async def handle_batch_rpc(body: bytes, engine: Engine, metrics: Metrics) -> EmbedReply:
    """`rpc_embed_batch`: the ingest context, the disk cache, chunked. The prefix follows the
    request's `kind` (query / document)."""
    t0 = time.perf_counter()
    req = _parse_rpc(body, metrics, "batch")
    if isinstance(req, EmbedReply):
        return req
    await engine.maybe_reload()
    try:
        vectors = await engine.embed_documents(req.texts, req.kind)
    except Exception as exc:
        return _rpc_failed(exc, metrics, "batch", t0)
    return _rpc_ok(vectors, engine, metrics, "batch", t0)
