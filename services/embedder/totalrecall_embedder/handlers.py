"""Thin message handlers: decode, call the core, publish, then ack / nak."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol

from pydantic import ValidationError
from totalrecall_schema import EmbedReply, EmbedRequest, Topology

from .core.backend import ModelUnavailable
from .core.batch import STAGE, Incoming, plan_batch
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


async def handle_event_batch(msgs: Sequence[RawMsg], engine: Engine, metrics: Metrics,
                             topology: Topology, publish: Publish,
                             retry_delay: float = 2.0) -> dict[str, int]:
    """One pulled batch of MemoryEvents → EmbeddedEvents.

    Every source message is acked only after what settles it (its EmbeddedEvent, the memory it
    was folded into, or its dead letter) was published and JetStream returned the PubAck; when a
    publish fails its sources are nak'ed with a delay (redelivered, never lost).
    """
    counts = {"published": 0, "dead": 0, "folded": 0, "retry": 0}
    if not msgs:
        return counts
    metrics.batch_size.observe(len(msgs))
    metrics.events_in.inc(len(msgs))
    await engine.maybe_reload()
    metrics.fallback_state.set(0 if engine.available else 1)

    plan = plan_batch([Incoming(m.subject, m.data) for m in msgs], engine.window,
                      can_embed=engine.available,
                      skip_categories=engine.config.dedup_skip_categories)

    async def dead_letter(i: int, payload: bytes) -> None:
        try:
            await publish(topology.dlq_subject(STAGE), payload, dict(JSON_HEADERS),
                          topology.dlq_stream)
        except Exception as exc:  # cannot park it: leave it to redelivery
            log.warning("dead-letter publish failed (%s); message will be redelivered", exc)
            metrics.publish_errors.inc()
            counts["retry"] += 1
            await msgs[i].nak(delay=retry_delay)
            return
        metrics.dead_letters.inc()
        counts["dead"] += 1
        await msgs[i].ack()

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

    async def send(o: Any) -> None:
        await publish(o.subject, o.embedded.model_dump_json().encode(),
                      {"Nats-Msg-Id": o.msg_id, **JSON_HEADERS}, topology.embedded_stream)

    results = await asyncio.gather(*(send(o) for o in outgoing), *dlq_tasks,
                                   return_exceptions=True)
    for o, res in zip(outgoing, results, strict=False):
        if isinstance(res, BaseException):
            log.warning("publishing %s failed (%s); %d message(s) will be redelivered",
                        o.subject, res, len(o.sources))
            metrics.publish_errors.inc()
            counts["retry"] += len(o.sources)
            for i in o.sources:
                await msgs[i].nak(delay=retry_delay)
            continue
        for i in o.sources:
            await msgs[i].ack()
        if engine.window is not None and o.dkey is not None:
            engine.window.put(o.dkey, o.to_seen())
        metrics.events_out.labels(kind=o.kind).inc()
        metrics.dedup_dropped.inc(o.folded)
        counts["published"] += 1
        counts["folded"] += o.folded
    return counts


async def handle_embed_rpc(body: bytes, engine: Engine, metrics: Metrics,
                           path: Literal["query", "batch"]) -> EmbedReply:
    """`rpc_embed_query` (query context) / `rpc_embed_batch` (ingest context, chunked)."""
    t0 = time.perf_counter()
    try:
        req = EmbedRequest.model_validate_json(body)
    except (ValidationError, ValueError) as exc:
        metrics.rpc_requests.labels(kind=path, outcome="invalid").inc()
        return EmbedReply(error=f"invalid EmbedRequest: {exc}"[:2000])
    await engine.maybe_reload()
    try:
        if path == "query":
            vectors = await engine.embed_query(req.texts)
        else:
            vectors = await engine.embed_documents(req.texts)
    except ModelUnavailable as exc:
        metrics.rpc_requests.labels(kind=path, outcome="unavailable").inc()
        return EmbedReply(error=f"embedding model unavailable: {exc}",
                          took_ms=(time.perf_counter() - t0) * 1000)
    except Exception as exc:
        log.exception("embedding RPC failed")
        metrics.rpc_requests.labels(kind=path, outcome="error").inc()
        return EmbedReply(error=f"embedding failed: {exc}",
                          took_ms=(time.perf_counter() - t0) * 1000)
    took = time.perf_counter() - t0
    metrics.query_seconds.labels(kind=path).observe(took)
    metrics.rpc_requests.labels(kind=path, outcome="ok").inc()
    return EmbedReply(vectors=vectors, model=engine.fingerprint, dim=engine.dim,
                      took_ms=took * 1000)
