"""The indexer's I/O besides its stores: the embedder over NATS, the runtime gauges."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Awaitable, Callable
from typing import Any

from totalrecall_schema import EmbedReply, EmbedRequest
from totalrecall_worker import consumer_backlog

from ..core.indexer import EmbedFn
from ..metrics import Metrics
from ..settings import Settings

log = logging.getLogger("totalrecall.indexer")


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


def nats_in_flight_fn(nc: Any, settings: Settings) -> Callable[[], Awaitable[int]]:
    """The indexer consumer's messages not acked yet (pending + ack-pending; 0 before the
    consumer exists)."""
    async def in_flight() -> int:
        from nats.js.errors import NotFoundError

        total = 0
        for durable in own_durables(settings):
            with contextlib.suppress(NotFoundError):
                total += int(await consumer_backlog(nc, settings.topology.embedded_stream,
                                                    durable))
        return total
    return in_flight


def own_durables(settings: Settings) -> list[str]:
    """The durable consumers of the partitions this indexer owns."""
    return [settings.topology.indexer_durable_of(p) for p in settings.own_partitions]


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
    try:
        backlog = [await consumer_backlog(nc, topo.embedded_stream, d)
                   for d in own_durables(settings)]
        metrics.consumer_pending.set(sum(backlog))
    except Exception as exc:  # consumer not created yet, NATS trouble
        log.debug("consumer info: %s", exc)
    try:
        dlq = await nc.jetstream().stream_info(topo.dlq_stream)
        metrics.dlq_messages.set(dlq.state.messages)
    except Exception as exc:
        log.debug("dlq stream info: %s", exc)
